// The CUDA kernels. See launch.h for why this unit has a C interface.
#include <cuda_runtime.h>

#include "kernels/cuda/detail/launch.h"

// nvcc's implicit headers declare ::ballot(bool) (the deprecated pre-Volta warp vote); rename our
// namespace inside this unit only. Everything from it used here is inline, so nothing with the
// renamed namespace escapes into the link.
#define ballot ballot_in_cuda_unit
#include "core/philox.h"
#include "kernels/sign_logic.h"
#include "kernels/update_logic.h"

namespace {

using ballot_in_cuda_unit::kernels::bitsliced_add;
using ballot_in_cuda_unit::kernels::bitsliced_greater_equal;
using ballot_in_cuda_unit::kernels::decayed_step;
using ballot_in_cuda_unit::kernels::momentum_sgd_step;
using ballot_in_cuda_unit::kernels::momentum_step;
using ballot_in_cuda_unit::kernels::planes_for;
using ballot_in_cuda_unit::kernels::SgdFactors;
using ballot_in_cuda_unit::kernels::sign_bit;
using ballot_in_cuda_unit::kernels::vote_threshold;

constexpr int kThreadsPerBlock = 256;

unsigned grid_for(std::size_t threads) {
  const std::size_t blocks = (threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks == 0) return 1;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// Each warp packs kWordsPerWarp consecutive words per step: every lane first loads its 2 ·
// kWordsPerWarp values (coalesced: 32 consecutive floats per load across the warp), so that many
// loads are in flight before the first ballot; then two ballots per word (bit k of a ballot = lane
// k, matching bit k = coordinate 64w + k), and lane j stores word j. Grid-stride; the loop bound is
// uniform across a warp, so every lane takes part in every ballot.
constexpr int kWordsPerWarp = 4;

// Words base … base + kWordsPerWarp − 1 from the lanes' bits: two ballots per word (bit k of a
// ballot = lane k, matching bit k = coordinate 64w + k); lane j stores word base + j. Every lane
// of the warp must call it (the ballots are warp-wide).
__device__ inline void store_ballots(const bool (&bits)[2 * kWordsPerWarp], unsigned lane, std::size_t base,
                                     std::size_t num_words, std::uint64_t* words) {
#pragma unroll
  for (int j = 0; j < kWordsPerWarp; ++j) {
    const unsigned low_bits = __ballot_sync(0xffffffffu, bits[2 * j]);
    const unsigned high_bits = __ballot_sync(0xffffffffu, bits[2 * j + 1]);
    if (lane == static_cast<unsigned>(j) && base + j < num_words) {
      words[base + j] = static_cast<std::uint64_t>(low_bits) | (static_cast<std::uint64_t>(high_bits) << 32);
    }
  }
}

__global__ void pack_kernel(const float* values, std::size_t count, std::uint64_t* words, std::size_t num_words) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps_in_grid = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  for (std::size_t base = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * kWordsPerWarp;
       base < num_words; base += warps_in_grid * kWordsPerWarp) {
    bool bits[2 * kWordsPerWarp];
#pragma unroll
    for (int j = 0; j < 2 * kWordsPerWarp; ++j) {
      const std::size_t index = 64 * base + 32 * static_cast<std::size_t>(j) + lane;
      bits[j] = index < count && sign_bit(values[index]);
    }
    store_ballots(bits, lane, base, num_words, words);
  }
}

// Signum's momentum fused with the sign pack: the pack kernel's loop, where each lane first loads
// its 2 · kWordsPerWarp momentum and gradient values, updates and stores the momentum, then takes
// the ballots of sign(new m). One pass over m and g instead of two.
__global__ void momentum_pack_kernel(float* momentum, const float* gradient, std::size_t count, float keep, float mix,
                                     std::uint64_t* words, std::size_t num_words) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps_in_grid = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  for (std::size_t base = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * kWordsPerWarp;
       base < num_words; base += warps_in_grid * kWordsPerWarp) {
    float m[2 * kWordsPerWarp], g[2 * kWordsPerWarp];
#pragma unroll
    for (int j = 0; j < 2 * kWordsPerWarp; ++j) {
      const std::size_t index = 64 * base + 32 * static_cast<std::size_t>(j) + lane;
      m[j] = index < count ? momentum[index] : 0.0f;
      g[j] = index < count ? gradient[index] : 0.0f;
    }
    bool bits[2 * kWordsPerWarp];
#pragma unroll
    for (int j = 0; j < 2 * kWordsPerWarp; ++j) {
      const std::size_t index = 64 * base + 32 * static_cast<std::size_t>(j) + lane;
      const float updated = momentum_step(m[j], g[j], keep, mix);
      bits[j] = index < count && sign_bit(updated);
      if (index < count) momentum[index] = updated;
    }
    store_ballots(bits, lane, base, num_words, words);
  }
}

// Each thread writes kFloatsPerThread consecutive outputs from one word: one 16-byte store when the
// output is 16-byte aligned there (torch and cudaMalloc allocations are), else four 4-byte stores.
constexpr int kFloatsPerThread = 4;

__global__ void unpack_kernel(const std::uint64_t* words, std::size_t count, float negative, float positive,
                              float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x * kFloatsPerThread;
  for (std::size_t i = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kFloatsPerThread; i < count;
       i += stride) {
    // i is a multiple of 4, so the four coordinates share one word.
    const std::uint64_t word = words[i / 64] >> (i % 64);
    if (i + kFloatsPerThread <= count && reinterpret_cast<std::uintptr_t>(out + i) % 16 == 0) {
      *reinterpret_cast<float4*>(out + i) =
          make_float4((word & 1u) ? positive : negative, (word & 2u) ? positive : negative,
                      (word & 4u) ? positive : negative, (word & 8u) ? positive : negative);
    } else {
      for (int k = 0; k < kFloatsPerThread && i + k < count; ++k) out[i + k] = ((word >> k) & 1u) ? positive : negative;
    }
  }
}

// The update rules from a decision (kernels/update_logic.h), kFloatsPerThread consecutive
// coordinates a thread: 16-byte loads and stores where every array is 16-byte aligned there (the
// alignment of an offset multiple of 4 is that of the base pointer, so the branch is uniform).
// The direction is the vote's bits (±1) or an fp32 array; the momentum buffer is used when
// kMomentum.
struct Four {
  float v[4];
};
__device__ inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
__device__ inline Four load4(const float* p, std::size_t i, std::size_t count, bool vector) {
  Four out{};
  if (vector) {
    const float4 v = *reinterpret_cast<const float4*>(p + i);
    out = Four{{v.x, v.y, v.z, v.w}};
  } else {
    for (int k = 0; k < 4; ++k) out.v[k] = i + k < count ? p[i + k] : 0.0f;
  }
  return out;
}
__device__ inline void store4(float* p, std::size_t i, std::size_t count, bool vector, const Four& value) {
  if (vector) {
    *reinterpret_cast<float4*>(p + i) = make_float4(value.v[0], value.v[1], value.v[2], value.v[3]);
  } else {
    for (int k = 0; k < 4 && i + k < count; ++k) p[i + k] = value.v[k];
  }
}

template <bool kVote, bool kMomentum>
__global__ void update_kernel(float* params, const std::uint64_t* vote, const float* direction, float* buffer,
                              std::size_t count, SgdFactors factors, bool first_step) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x * kFloatsPerThread;
  const bool aligned = aligned16(params) && (kVote || aligned16(direction)) && (!kMomentum || aligned16(buffer));
  for (std::size_t i = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kFloatsPerThread; i < count;
       i += stride) {
    const bool vector = aligned && i + kFloatsPerThread <= count;
    Four x = load4(params, i, count, vector);
    Four g;
    if constexpr (kVote) {
      const std::uint64_t word = vote[i / 64] >> (i % 64);
#pragma unroll
      for (int k = 0; k < 4; ++k) g.v[k] = ((word >> k) & 1u) ? 1.0f : -1.0f;
    } else {
      g = load4(direction, i, count, vector);
    }
    if constexpr (kMomentum) {
      Four b = load4(buffer, i, count, vector);
#pragma unroll
      for (int k = 0; k < 4; ++k) momentum_sgd_step(x.v[k], b.v[k], g.v[k], factors, first_step);
      store4(buffer, i, count, vector, b);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) x.v[k] = decayed_step(x.v[k], g.v[k], factors.lr, factors.weight_decay);
    }
    store4(params, i, count, vector, x);
  }
}

// One thread per output word, bit-sliced counters in registers (the CPU's algorithm, shared code).
// The counter width is a template parameter so that every plane index is a compile-time constant
// after inlining and unrolling — a runtime-sized counter array lives in local memory instead (the
// no-stack-frame test in CMakeLists.txt checks this). Counters wider than the total weight needs
// give the same result (the upper planes stay zero), so four widths cover every vote. A weight is
// added bit by bit, each set bit b of it adding the input at plane b (b < kPlanes, since every
// weight is at most the total). Row i of the inputs starts at inputs + i * num_words, so a warp
// reads 32 consecutive words.
template <int kPlanes, bool kWeighted>
__global__ void vote_kernel(const std::uint64_t* inputs, std::size_t num_inputs, std::size_t num_words,
                            const std::uint32_t* weights, std::uint64_t threshold, std::uint64_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < num_words; w += stride) {
    std::uint64_t planes[kPlanes] = {};
    // Unrolled so that several rows' loads are in flight before the first add needs its word.
#pragma unroll 4
    for (std::size_t i = 0; i < num_inputs; ++i) {
      const std::uint64_t x = inputs[i * num_words + w];
      if constexpr (kWeighted) {
        const std::uint32_t weight = weights[i];
#pragma unroll
        for (int b = 0; b < kPlanes; ++b) {
          if ((weight >> b) & 1u) bitsliced_add(planes, kPlanes, b, x);
        }
      } else {
        bitsliced_add(planes, kPlanes, 0, x);
      }
    }
    out[w] = bitsliced_greater_equal(planes, kPlanes, threshold);
  }
}

template <int kPlanes>
void launch_vote(const std::uint64_t* inputs, std::size_t num_inputs, std::size_t num_words,
                 const std::uint32_t* weights, std::uint64_t threshold, std::uint64_t* out, cudaStream_t stream) {
  if (weights != nullptr) {
    vote_kernel<kPlanes, true>
        <<<grid_for(num_words), kThreadsPerBlock, 0, stream>>>(inputs, num_inputs, num_words, weights, threshold, out);
  } else {
    vote_kernel<kPlanes, false>
        <<<grid_for(num_words), kThreadsPerBlock, 0, stream>>>(inputs, num_inputs, num_words, weights, threshold, out);
  }
}

// Word first + i of the random stream (seed, stream), computed independently by thread i: the
// same function the CPU's Rng uses (core/philox.h).
__global__ void philox_kernel(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count,
                              std::uint32_t* out) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    out[i] = ballot_in_cuda_unit::philox_stream_word(seed, stream, first + i);
  }
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

extern "C" int ballot_cuda_launch_pack(const float* d_values, std::size_t count, std::uint64_t* d_words, void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const std::size_t num_words = (count + 63) / 64;
  if (num_words == 0) return cudaSuccess;
  pack_kernel<<<grid_for((num_words + kWordsPerWarp - 1) / kWordsPerWarp * 32), kThreadsPerBlock, 0,
                as_stream(stream)>>>(d_values, count, d_words, num_words);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_unpack(const std::uint64_t* d_words, std::size_t count, float negative,
                                         float positive, float* d_out, void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return cudaSuccess;
  unpack_kernel<<<grid_for((count + kFloatsPerThread - 1) / kFloatsPerThread), kThreadsPerBlock, 0,
                  as_stream(stream)>>>(d_words, count, negative, positive, d_out);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_philox(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                         std::size_t count, std::uint32_t* d_out, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return cudaSuccess;
  philox_kernel<<<grid_for(count), kThreadsPerBlock, 0, as_stream(stream_handle)>>>(seed, stream, first, count, d_out);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_vote(const std::uint64_t* d_inputs, std::size_t num_inputs, std::size_t num_words,
                                       const std::uint32_t* d_weights, std::uint64_t total_weight, std::uint64_t* d_out,
                                       void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (num_words == 0) return cudaSuccess;
  const int planes = planes_for(total_weight);  // total_weight < 2^32: at most 32
  const std::uint64_t threshold = vote_threshold(total_weight);
  if (planes <= 4) {
    launch_vote<4>(d_inputs, num_inputs, num_words, d_weights, threshold, d_out, as_stream(stream));
  } else if (planes <= 8) {
    launch_vote<8>(d_inputs, num_inputs, num_words, d_weights, threshold, d_out, as_stream(stream));
  } else if (planes <= 16) {
    launch_vote<16>(d_inputs, num_inputs, num_words, d_weights, threshold, d_out, as_stream(stream));
  } else {
    launch_vote<32>(d_inputs, num_inputs, num_words, d_weights, threshold, d_out, as_stream(stream));
  }
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_momentum_pack(float* d_momentum, const float* d_gradient, std::size_t count,
                                                float keep, float mix, std::uint64_t* d_words, void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const std::size_t num_words = (count + 63) / 64;
  if (num_words == 0) return cudaSuccess;
  momentum_pack_kernel<<<grid_for((num_words + kWordsPerWarp - 1) / kWordsPerWarp * 32), kThreadsPerBlock, 0,
                         as_stream(stream)>>>(d_momentum, d_gradient, count, keep, mix, d_words, num_words);
  return cudaGetLastError();
}

extern "C" int ballot_cuda_launch_update(float* d_params, const std::uint64_t* d_vote, const float* d_direction,
                                         float* d_buffer, std::size_t count, float lr, float weight_decay,
                                         float momentum, float keep, int nesterov, int first_step, void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return cudaSuccess;
  const SgdFactors factors{lr, weight_decay, momentum, keep, nesterov != 0};
  const unsigned grid = grid_for((count + kFloatsPerThread - 1) / kFloatsPerThread);
  const cudaStream_t s = as_stream(stream);
  const bool with_momentum = d_buffer != nullptr;
  if (d_vote != nullptr && with_momentum) {
    update_kernel<true, true>
        <<<grid, kThreadsPerBlock, 0, s>>>(d_params, d_vote, d_direction, d_buffer, count, factors, first_step != 0);
  } else if (d_vote != nullptr) {
    update_kernel<true, false>
        <<<grid, kThreadsPerBlock, 0, s>>>(d_params, d_vote, d_direction, d_buffer, count, factors, first_step != 0);
  } else if (with_momentum) {
    update_kernel<false, true>
        <<<grid, kThreadsPerBlock, 0, s>>>(d_params, d_vote, d_direction, d_buffer, count, factors, first_step != 0);
  } else {
    update_kernel<false, false>
        <<<grid, kThreadsPerBlock, 0, s>>>(d_params, d_vote, d_direction, d_buffer, count, factors, first_step != 0);
  }
  return cudaGetLastError();
}
