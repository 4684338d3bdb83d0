// Internal: the C-linkage launcher of the coordinate-wise kernels, with plain types only. launch.cu
// is compiled by nvcc, whose implicit CUDA headers declare a global function `ballot` that collides
// with our namespace (kernels/cuda/detail/launch.h explains); this interface keeps namespace ballot out of
// the link. Returns a cudaError_t as int (0 = success).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// op: a robust::cuda::CoordinateOp; 1 ≤ n ≤ 64, f as the CPU rule's options (0 for the mean).
// Zeroes *d_non_finite, then runs the two passes on the stream (robust_cuda.h).
int ballot_robust_cuda_launch_coordinate_wise(int op, int n, int f, const float* d_inputs, std::size_t d, float* d_out,
                                              std::uint64_t* d_non_finite, void* stream);

// The distance rules (distances.cu). d_gram[i·n + j] += the sum of double(d_blocks[b·n·n + j·n + i])
// for i ≥ j over b = 0 … blocks − 1 (column-major n×n float Gram blocks, cuBLAS's layout), in a
// fixed order: the blocks in chunks of about √blocks, each chunk summed in order from +0.0 into
// d_partial, then the chunks' sums added in order. d_partial holds gram_max_chunks(B)·n·n doubles,
// enough for any call with blocks ≤ B.
std::size_t ballot_robust_cuda_gram_max_chunks(std::size_t blocks);
int ballot_robust_cuda_sum_gram_blocks(const float* d_blocks, std::size_t n, std::size_t blocks, double* d_partial,
                                       double* d_gram, void* stream);
// *d_flag = 1 if d_row[0, d) holds a NaN or ±Inf, else 0.
int ballot_robust_cuda_row_non_finite(const float* d_row, std::size_t d, int* d_flag, void* stream);
// d_out[j] = (…((+0.0f + c·x_0[j]) + c·x_1[j]) + …) in float, each product and sum rounded to
// nearest, x_k = d_inputs + d_rows[k]·d for k < count (count ≥ 1).
int ballot_robust_cuda_scaled_sum_of_rows(const float* d_inputs, std::size_t d, const std::uint32_t* d_rows, int count,
                                          float c, float* d_out, void* stream);
}
