// The CUDA kernels. See launch.h for why this unit has a C interface.
#include "kernels/cuda/launch.h"

#include <cuda_runtime.h>

// nvcc's implicit headers declare ::ballot(bool) (the deprecated pre-Volta warp vote); rename our
// namespace inside this unit only. Everything from it used here is inline, so nothing with the
// renamed namespace escapes into the link.
#define ballot ballot_in_cuda_unit
#include "core/philox.h"
#include "kernels/sign_logic.h"

namespace {

using ballot_in_cuda_unit::kernels::bitsliced_add;
using ballot_in_cuda_unit::kernels::bitsliced_greater_equal;
using ballot_in_cuda_unit::kernels::planes_for;
using ballot_in_cuda_unit::kernels::sign_bit;
using ballot_in_cuda_unit::kernels::vote_threshold;

constexpr int kThreadsPerBlock = 256;
constexpr int kMaxPlanes = 32;

unsigned grid_for(std::size_t threads) {
  const std::size_t blocks = (threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks == 0) return 1;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// One warp per output word: lanes read values 64w + lane and 64w + 32 + lane; two ballots make
// the word (bit k of the ballot = lane k, matching bit k = coordinate 64w + k). Grid-stride.
__global__ void pack_kernel(const float* values, std::size_t count, std::uint64_t* words,
                            std::size_t num_words) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps_in_grid = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  for (std::size_t w = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < num_words; w += warps_in_grid) {
    const std::size_t low_index = 64 * w + lane, high_index = low_index + 32;
    const bool low = low_index < count && sign_bit(values[low_index]);
    const bool high = high_index < count && sign_bit(values[high_index]);
    const unsigned low_bits = __ballot_sync(0xffffffffu, low);
    const unsigned high_bits = __ballot_sync(0xffffffffu, high);
    if (lane == 0) {
      words[w] = static_cast<std::uint64_t>(low_bits) | (static_cast<std::uint64_t>(high_bits) << 32);
    }
  }
}

__global__ void unpack_kernel(const std::uint64_t* words, std::size_t count, float negative,
                              float positive, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    out[i] = ((words[i / 64] >> (i % 64)) & 1u) ? positive : negative;
  }
}

// One thread per output word, bit-sliced counters in registers (the CPU's algorithm, shared code).
// Row i of the inputs starts at inputs + i * num_words, so a warp reads 32 consecutive words.
__global__ void vote_kernel(const std::uint64_t* inputs, std::size_t num_inputs,
                            std::size_t num_words, const std::uint32_t* weights,
                            std::uint64_t threshold, int planes_used, std::uint64_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       w < num_words; w += stride) {
    std::uint64_t planes[kMaxPlanes] = {};
    for (std::size_t i = 0; i < num_inputs; ++i) {
      const std::uint64_t x = inputs[i * num_words + w];
      if (weights == nullptr) {
        bitsliced_add(planes, planes_used, 0, x);
      } else {
        for (std::uint32_t weight = weights[i]; weight != 0; weight &= weight - 1) {
          bitsliced_add(planes, planes_used, __ffs(static_cast<int>(weight)) - 1, x);
        }
      }
    }
    out[w] = bitsliced_greater_equal(planes, planes_used, threshold);
  }
}

// Word first + i of the random stream (seed, stream), computed independently by thread i: the
// same function the CPU's Rng uses (core/philox.h).
__global__ void philox_kernel(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                              std::size_t count, std::uint32_t* out) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    out[i] = ballot_in_cuda_unit::philox_stream_word(seed, stream, first + i);
  }
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

extern "C" int ballot_cuda_launch_pack(const float* d_values, std::size_t count,
                                       std::uint64_t* d_words, void* stream) {
  const std::size_t num_words = (count + 63) / 64;
  if (num_words == 0) return cudaSuccess;
  pack_kernel<<<grid_for(num_words * 32), kThreadsPerBlock, 0, as_stream(stream)>>>(
      d_values, count, d_words, num_words);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_unpack(const std::uint64_t* d_words, std::size_t count,
                                         float negative, float positive, float* d_out,
                                         void* stream) {
  if (count == 0) return cudaSuccess;
  unpack_kernel<<<grid_for(count), kThreadsPerBlock, 0, as_stream(stream)>>>(d_words, count, negative,
                                                                            positive, d_out);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_philox(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                         std::size_t count, std::uint32_t* d_out, void* stream_handle) {
  if (count == 0) return cudaSuccess;
  philox_kernel<<<grid_for(count), kThreadsPerBlock, 0, as_stream(stream_handle)>>>(seed, stream, first, count, d_out);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_vote(const std::uint64_t* d_inputs, std::size_t num_inputs,
                                       std::size_t num_words, const std::uint32_t* d_weights,
                                       std::uint64_t total_weight, std::uint64_t* d_out,
                                       void* stream) {
  if (num_words == 0) return cudaSuccess;
  vote_kernel<<<grid_for(num_words), kThreadsPerBlock, 0, as_stream(stream)>>>(
      d_inputs, num_inputs, num_words, d_weights, vote_threshold(total_weight),
      planes_for(total_weight), d_out);
  return cudaGetLastError();
}
