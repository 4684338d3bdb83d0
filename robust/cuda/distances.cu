// The device kernels of the distance rules (distances.h). See launch.h for why this unit has a C
// interface.
#include <cuda_runtime.h>

#include "robust/cuda/detail/launch.h"

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  const std::size_t cap = 65535u * 8u;  // grid-stride loops cover the rest
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks < cap ? blocks : cap);
}

// Blocks per chunk for `count` blocks: about √count, so that both passes below loop over about
// √count values per thread (a thread per entry alone would loop over every block: 6250 at
// d = 25.6 M, with only n² threads at work).
std::size_t chunk_size(std::size_t count) {
  std::size_t size = 16;
  while (size * size < count) size *= 2;
  return size;
}

// First pass: one thread per (chunk, entry) of the column-major blocks (e = j·n + i, consecutive
// threads read consecutive floats of each block); the lower triangle's entries (i ≥ j) sum their
// chunk's blocks in order from +0.0 into partial[c·n² + e], the others return.
__global__ void __launch_bounds__(kThreads)
    gram_chunk_kernel(const float* __restrict__ blocks, std::size_t n, std::size_t count, std::size_t chunk,
                      double* __restrict__ partial) {
  const std::size_t entries = n * n, chunks = (count + chunk - 1) / chunk;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < entries * chunks;
       t += stride) {
    const std::size_t c = t / entries, e = t % entries;
    if (e % n < e / n) continue;  // i < j
    const std::size_t last = (c + 1) * chunk < count ? (c + 1) * chunk : count;
    double sum = 0.0;
    for (std::size_t b = c * chunk; b < last; ++b) sum = __dadd_rn(sum, static_cast<double>(blocks[b * entries + e]));
    partial[c * entries + e] = sum;
  }
}

// Second pass: one thread per lower-triangle entry adds the chunks' sums in chunk order to
// gram[i·n + j].
__global__ void __launch_bounds__(kThreads) gram_combine_kernel(const double* __restrict__ partial, std::size_t n,
                                                                std::size_t chunks, double* __restrict__ gram) {
  const std::size_t entries = n * n;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries; e += stride) {
    const std::size_t j = e / n, i = e % n;
    if (i < j) continue;
    double sum = gram[i * n + j];
    for (std::size_t c = 0; c < chunks; ++c) sum = __dadd_rn(sum, partial[c * entries + e]);
    gram[i * n + j] = sum;
  }
}

__global__ void __launch_bounds__(kThreads)
    row_non_finite_kernel(const float* __restrict__ row, std::size_t d, int* __restrict__ flag) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < d; j += stride) {
    bad |= (__float_as_uint(row[j]) & 0x7f800000u) == 0x7f800000u;
  }
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) atomicOr(flag, 1);
}

__global__ void __launch_bounds__(kThreads)
    scaled_sum_kernel(const float* __restrict__ inputs, std::size_t d, const std::uint32_t* __restrict__ rows,
                      int count, float c, float* __restrict__ out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < d; j += stride) {
    float sum = 0.0f;
    for (int k = 0; k < count; ++k)
      sum = __fadd_rn(sum, __fmul_rn(c, inputs[static_cast<std::size_t>(rows[k]) * d + j]));
    out[j] = sum;
  }
}

}  // namespace

// For every count ≤ blocks: ⌈count / chunk_size(count)⌉ ≤ chunk_size(count) (count ≤ size²) ≤
// chunk_size(blocks) (it only grows).
extern "C" std::size_t ballot_robust_cuda_gram_max_chunks(std::size_t blocks) { return chunk_size(blocks); }

extern "C" int ballot_robust_cuda_sum_gram_blocks(const float* d_blocks, std::size_t n, std::size_t blocks,
                                                  double* d_partial, double* d_gram, void* stream) {
  if (n == 0 || blocks == 0) return cudaSuccess;
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t chunk = chunk_size(blocks), chunks = (blocks + chunk - 1) / chunk;
  (void)cudaGetLastError();  // a launch's error only, not one left by earlier calls of this thread
  gram_chunk_kernel<<<blocks_for(n * n * chunks), kThreads, 0, s>>>(d_blocks, n, blocks, chunk, d_partial);
  gram_combine_kernel<<<blocks_for(n * n), kThreads, 0, s>>>(d_partial, n, chunks, d_gram);
  return cudaGetLastError();
}

extern "C" int ballot_robust_cuda_row_non_finite(const float* d_row, std::size_t d, int* d_flag, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t zeroed = cudaMemsetAsync(d_flag, 0, sizeof(int), s);
  if (zeroed != cudaSuccess || d == 0) return zeroed;
  (void)cudaGetLastError();
  row_non_finite_kernel<<<blocks_for(d), kThreads, 0, s>>>(d_row, d, d_flag);
  return cudaGetLastError();
}

extern "C" int ballot_robust_cuda_scaled_sum_of_rows(const float* d_inputs, std::size_t d, const std::uint32_t* d_rows,
                                                     int count, float c, float* d_out, void* stream) {
  if (d == 0) return cudaSuccess;
  (void)cudaGetLastError();
  scaled_sum_kernel<<<blocks_for(d), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(d_inputs, d, d_rows, count, c,
                                                                                       d_out);
  return cudaGetLastError();
}
