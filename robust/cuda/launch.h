// Internal: the C-linkage launcher of the coordinate-wise kernels, with plain types only. launch.cu
// is compiled by nvcc, whose implicit CUDA headers declare a global function `ballot` that collides
// with our namespace (kernels/cuda/launch.h explains); this interface keeps namespace ballot out of
// the link. Returns a cudaError_t as int (0 = success).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// op: a robust::cuda::CoordinateOp; 1 ≤ n ≤ 64, f as the CPU rule's options (0 for the mean).
// Zeroes *d_non_finite, then runs the two passes on the stream (robust_cuda.h).
int ballot_robust_cuda_launch_coordinate_wise(int op, int n, int f, const float* d_inputs, std::size_t d, float* d_out,
                                              std::uint64_t* d_non_finite, void* stream);
}
