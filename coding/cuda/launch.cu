// The codec kernels. See launch.h for the interface and kernels/cuda/detail/launch.h for why this unit has
// a C interface.
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "coding/cuda/detail/launch.h"

// nvcc's implicit headers declare ::ballot(bool); rename our namespace inside this unit only
// (everything used from it is inline).
#define ballot ballot_in_cuda_unit
#include "coding/detail/codec_logic.h"
#include "core/philox.h"

namespace {

using ballot_in_cuda_unit::philox_stream_block;
using ballot_in_cuda_unit::PhiloxBlock;
namespace logic = ballot_in_cuda_unit::coding::detail;
namespace rn = ballot_in_cuda_unit::kernels;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr std::size_t kChunk = logic::kSumChunk;

unsigned grid_for(std::size_t threads, unsigned block) {
  const std::size_t blocks = (threads + block - 1) / block;
  if (blocks == 0) return 1;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

int last_error() { return static_cast<int>(cudaGetLastError()); }

// The last segment whose `field` (first_chunk or offset) is at most `value`: the segment holding
// that chunk or coordinate (empty segments that share an offset with the next one are skipped so).
template <std::uint64_t BallotCodecSegment::*kField>
__device__ inline std::size_t last_segment_at(const BallotCodecSegment* segments, std::size_t count,
                                              std::size_t value) {
  std::size_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (segments[mid].*kField <= value) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}
__device__ inline std::size_t segment_of_chunk(const BallotCodecSegment* segments, std::size_t count,
                                               std::size_t chunk) {
  return last_segment_at<&BallotCodecSegment::first_chunk>(segments, count, chunk);
}
__device__ inline std::size_t segment_of(const BallotCodecSegment* segments, std::size_t count, std::size_t i) {
  return last_segment_at<&BallotCodecSegment::offset>(segments, count, i);
}

// ---- per-segment factors ------------------------------------------------------------------------

// What a chunk adds into each of its two double sums, and what it keeps in its word.
enum Term : int { kNoTerm, kSquare, kValue, kAbs, kNonNegative, kNegative };
enum Word : int { kNoWord, kMaxBits, kNegatives };

// kNonNegative: x where it packs as bit 1 (x ≥ 0, −0, NaN), else 0; kNegative: x where x < 0, else 0.
template <int kTerm>
__device__ inline double term_of(double v) {
  if (kTerm == kSquare) return __dmul_rn(v, v);
  if (kTerm == kAbs) return fabs(v);
  if (kTerm == kNonNegative) return v < 0.0 ? 0.0 : v;
  if (kTerm == kNegative) return v < 0.0 ? v : 0.0;
  return v;
}

// One chunk per half-warp: lane j adds coordinates j, j + 16, … of the chunk in order (8 loads in
// flight per step), then lane 0 of the half adds the 16 lane sums in lane order, into first[chunk]
// (term kFirst) and second[chunk] (term kSecond). words[chunk] receives the largest magnitude's
// bits (kMaxBits) or the number of entries x < 0 (kNegatives).
template <int kFirst, int kSecond, int kWord>
__global__ void chunk_kernel(const float* x, const BallotCodecSegment* segments, std::size_t num_segments,
                             std::size_t total_chunks, double* first, double* second, std::uint32_t* words) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t chunk = thread / logic::kSumLanes;
  const unsigned lane = threadIdx.x % 32, j = lane % logic::kSumLanes, half_base = lane & 16u;
  double first_sum = 0.0, second_sum = 0.0;
  std::uint32_t word = 0;
  if (chunk < total_chunks) {
    const BallotCodecSegment segment = segments[segment_of_chunk(segments, num_segments, chunk)];
    const std::size_t local = chunk - segment.first_chunk;
    const float* y = x + segment.offset + local * kChunk;
    const std::size_t m = segment.size - local * kChunk < kChunk ? segment.size - local * kChunk : kChunk;
    constexpr int kAhead = 8;
    for (std::size_t i = j; i < m; i += kAhead * logic::kSumLanes) {
      float v[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        const std::size_t at = i + static_cast<std::size_t>(u) * logic::kSumLanes;
        v[u] = at < m ? y[at] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        if (i + static_cast<std::size_t>(u) * logic::kSumLanes >= m) break;
        const double value = v[u];
        if (kFirst != kNoTerm) first_sum = __dadd_rn(first_sum, term_of<kFirst>(value));
        if (kSecond != kNoTerm) second_sum = __dadd_rn(second_sum, term_of<kSecond>(value));
        if (kWord == kMaxBits) {
          const std::uint32_t bits = __float_as_uint(v[u]) & 0x7FFFFFFFu;
          word = bits > word ? bits : word;
        }
        if (kWord == kNegatives) word += v[u] < 0.0f ? 1u : 0u;
      }
    }
  }
  double chunk_first = 0.0, chunk_second = 0.0;
#pragma unroll
  for (int source = 0; source < logic::kSumLanes; ++source) {
    if (kFirst != kNoTerm) chunk_first = __dadd_rn(chunk_first, __shfl_sync(kFullMask, first_sum, half_base + source));
    if (kSecond != kNoTerm) {
      chunk_second = __dadd_rn(chunk_second, __shfl_sync(kFullMask, second_sum, half_base + source));
    }
  }
  if (kWord != kNoWord) {
    for (unsigned offset = 8; offset > 0; offset /= 2) {
      const std::uint32_t other = __shfl_xor_sync(kFullMask, word, offset);
      word = kWord == kNegatives ? word + other : (other > word ? other : word);
    }
  }
  if (chunk < total_chunks && j == 0) {
    if (kFirst != kNoTerm) first[chunk] = chunk_first;
    if (kSecond != kNoTerm) second[chunk] = chunk_second;
    if (kWord != kNoWord) words[chunk] = word;
  }
}

// codec_logic.h's pairwise levels over src[0, m) by one block, ping-ponging with dst. Every thread
// of the block calls it and gets the total.
__device__ double pairwise_total(double* src, double* dst, std::size_t m) {
  if (m == 0) return 0.0;
  while (m > 1) {
    const std::size_t half = m / 2;
    for (std::size_t i = threadIdx.x; i < half; i += blockDim.x) dst[i] = __dadd_rn(src[2 * i], src[2 * i + 1]);
    if (m % 2 != 0 && threadIdx.x == 0) dst[half] = src[m - 1];
    __syncthreads();
    double* swap = src;
    src = dst;
    dst = swap;
    m = half + m % 2;
  }
  const double total = src[0];
  __syncthreads();
  return total;
}

// One block per segment: the chunk sums added pairwise, the chunk words combined (maximum or
// count), then the factors.
__global__ void factors_kernel(int mode, int what, const BallotCodecSegment* segments, std::size_t total_chunks,
                               double* scratch, const std::uint32_t* words, float parameter, std::uint8_t* wire_scales,
                               float* inverse, float* limit, std::uint8_t* keep_all) {
  __shared__ std::uint32_t block_max;
  __shared__ unsigned long long block_count;
  const std::size_t k = blockIdx.x;
  const BallotCodecSegment segment = segments[k];
  const std::size_t m = (segment.size + kChunk - 1) / kChunk;
  double* first = scratch;
  double* second = scratch + total_chunks;
  double* spare = scratch + 2 * total_chunks;
  double total_first = 0.0, total_second = 0.0;
  if (what & 17) total_first = pairwise_total(first + segment.first_chunk, spare + segment.first_chunk, m);
  if (what & 26) total_second = pairwise_total(second + segment.first_chunk, spare + segment.first_chunk, m);
  if (threadIdx.x == 0) {
    block_max = 0;
    block_count = 0;
  }
  __syncthreads();
  if (what & 20) {
    std::uint32_t largest = 0;
    unsigned long long count = 0;
    for (std::size_t c = threadIdx.x; c < m; c += blockDim.x) {
      const std::uint32_t word = words[segment.first_chunk + c];
      largest = word > largest ? word : largest;
      count += word;
    }
    if (what & 4) atomicMax(&block_max, largest);
    if (what & 16) atomicAdd(&block_count, count);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (mode == 4) {
    inverse[k] = logic::dgc_clip_factor(total_first, parameter);
    return;
  }
  float* scale_out = reinterpret_cast<float*>(wire_scales + 4 * k);
  if (mode == 2) {
    *scale_out = logic::scaled_sign_scale(total_second, segment.size);
    return;
  }
  if (mode == 3) {
    const logic::OneBitScales scales =
        logic::onebit_scales(total_first, total_second, static_cast<std::size_t>(block_count), segment.size);
    float* pair = reinterpret_cast<float*>(wire_scales + 8 * k);
    pair[0] = scales.positive;
    pair[1] = scales.negative;
    return;
  }
  if (mode == 0) {
    const logic::QsgdFactors factors = logic::qsgd_factors(total_first, parameter);
    *scale_out = factors.norm;
    inverse[k] = factors.inverse;
    return;
  }
  const float largest = block_max > 0x7F800000u ? __uint_as_float(0x7FC00000u) : __uint_as_float(block_max);
  const logic::TernGradFactors factors =
      logic::terngrad_factors(largest, total_second, total_first, segment.size, parameter);
  *scale_out = factors.scale;
  inverse[k] = factors.inverse;
  limit[k] = factors.limit;
  keep_all[k] = factors.keep_all ? 1 : 0;
}

// ---- the quantising pass ----------------------------------------------------------------------------

// A warp takes two rounding groups (coding/detail/rounding.h): lane (h, j) computes Philox block
// first_block + 16g + j of group g = 2·pair + h, whose 8 draws serve coordinates 128g + 16m + j
// (m = 0…7). 32-bit word q of group g holds m = 2q in its low and m = 2q + 1 in its high half,
// so each stream takes 8 ballots per pair, and lane 2q + h, the word's writer, keeps the two it
// needs and stores the word (computed once per pair: which word, and whether it exists).
struct Writer {
  bool active;        // lanes 0…7 whose word lies inside the stream
  unsigned q;         // the word of the group
  unsigned selector;  // __byte_perm selector: low halves (h = 0) or high halves (h = 1)
  std::size_t at;     // the word's index in the stream
};

__device__ inline void store_stream(const bool (&bits)[8], const Writer& writer, std::uint32_t* words) {
  unsigned low = 0, high = 0;
#pragma unroll
  for (unsigned q = 0; q < 4; ++q) {
    const unsigned a = __ballot_sync(kFullMask, bits[2 * q]);
    const unsigned b = __ballot_sync(kFullMask, bits[2 * q + 1]);
    if (writer.q == q) {
      low = a;
      high = b;
    }
  }
  // h = 0: low halves of both (bits 0-15 from m = 2q, 16-31 from m = 2q + 1); h = 1: high halves.
  if (writer.active) words[writer.at] = __byte_perm(low, high, writer.selector);
}

template <int kMode>
__global__ void quantize_kernel(const float* x, std::size_t d, const BallotCodecSegment* segments,
                                std::size_t num_segments, const float* inverse, const float* limit,
                                const std::uint8_t* keep_all, float s, int planes, std::uint64_t seed,
                                std::uint64_t rng_stream, std::uint64_t first_block, std::uint32_t* streams,
                                std::size_t stream_words) {
  const unsigned lane = threadIdx.x % 32, h = lane / 16, j = lane % 16;
  const std::size_t num_groups = (d + 127) / 128;
  const std::size_t warps_in_grid = (static_cast<std::size_t>(gridDim.x) * blockDim.x) / 32;
  // One segment (model granularity): its factors once.
  const float inverse0 = inverse[0];
  const float limit0 = kMode == 1 ? limit[0] : 0.0f;
  const bool keep_all0 = kMode == 1 && keep_all[0] != 0;
  for (std::size_t pair = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; 2 * pair < num_groups;
       pair += warps_in_grid) {
    const std::size_t group = 2 * pair + h;
    const std::size_t base = 128 * group;
    const PhiloxBlock random = philox_stream_block(seed, rng_stream, first_block + 16 * group + j);
    // The pair lies wholly inside the gradient (every pair but perhaps the last).
    const bool full = 128 * (2 * pair + 2) <= d;
    float value[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const std::size_t i = base + 16 * static_cast<unsigned>(m) + j;
      value[m] = full || i < d ? x[i] : 0.0f;
    }
    bool sign[8];
    std::uint32_t level[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const std::size_t i = base + 16 * static_cast<unsigned>(m) + j;
      const bool inside = full || i < d;
      float inv = inverse0, lim = limit0;
      bool all = keep_all0;
      if (num_segments > 1 && inside) {
        const std::size_t k = segment_of(segments, num_segments, i);
        inv = inverse[k];
        if (kMode == 1) {
          lim = limit[k];
          all = keep_all[k] != 0;
        }
      }
      const std::uint32_t bits = (random.v[m / 2] >> (16 * (m % 2))) & 0xFFFFu;
      sign[m] = inside && logic::non_negative(value[m]);
      if (kMode == 0) {
        level[m] = inside ? logic::qsgd_level(value[m], bits, inv, s) : 0u;
      } else {
        level[m] = inside && (all || logic::terngrad_keep(value[m], bits, lim, inv)) ? 1u : 0u;
      }
    }
    Writer writer;
    writer.q = lane / 2;
    const std::size_t writer_group = 2 * pair + (lane & 1u);
    writer.at = 4 * writer_group + writer.q;
    writer.active = lane < 8 && writer_group < num_groups && writer.at < stream_words;
    writer.selector = (lane & 1u) == 0 ? 0x5410u : 0x7632u;
    store_stream(sign, writer, streams);
    const int level_streams = kMode == 0 ? planes : 1;
    for (int p = 0; p < level_streams; ++p) {
      bool bit[8];
#pragma unroll
      for (int m = 0; m < 8; ++m) bit[m] = (level[m] & (1u << p)) != 0;
      store_stream(bit, writer, streams + stream_words * static_cast<std::size_t>(1 + p));
    }
  }
}

// ---- QSGD's Elias coding -----------------------------------------------------------------------------

// The levels of the fixed-width pass (quantize_kernel<0>): thread (group, j) computes Philox block
// first_block + 16·group + j, whose 8 draws serve coordinates 128·group + 16m + j.
__global__ void qsgd_levels_kernel(const float* x, std::size_t d, const BallotCodecSegment* segments,
                                   std::size_t num_segments, const float* inverse, float s, std::uint64_t seed,
                                   std::uint64_t rng_stream, std::uint64_t first_block, std::uint32_t* level) {
  const std::size_t lanes = 16 * ((d + 127) / 128);
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < lanes;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t group = t / 16, j = t % 16;
    const PhiloxBlock random = philox_stream_block(seed, rng_stream, first_block + t);
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const std::size_t i = 128 * group + 16 * static_cast<std::size_t>(m) + j;
      if (i >= d) break;
      const std::size_t k = num_segments == 1 ? 0 : segment_of(segments, num_segments, i);
      const std::uint32_t bits = (random.v[m / 2] >> (16 * (m % 2))) & 0xFFFFu;
      level[i] = logic::qsgd_level(x[i], bits, inverse[k], s);
    }
  }
}

// A coordinate's code: γ(level + 1) (⌊log₂(level + 1)⌋ zeros, then level + 1 from its top bit),
// then, for a level above 0, the sign bit (1 unless x < 0); LSB first, as detail::BitWriter puts it.
__device__ inline int elias_length(std::uint32_t level) {
  const int width = 32 - __clz(static_cast<int>(level + 1));
  return 2 * width - 1 + (level != 0 ? 1 : 0);
}
__device__ inline std::uint64_t elias_code(std::uint32_t level, float x) {
  const std::uint32_t value = level + 1;
  const int width = 32 - __clz(static_cast<int>(value));
  const std::uint64_t reversed = __brev(value) >> (32 - width);  // the value's bits, top bit first
  std::uint64_t code = reversed << (width - 1);
  if (level != 0 && !(x < 0.0f)) code |= std::uint64_t{1} << (2 * width - 1);
  return code;
}

struct EliasLength {
  __device__ std::uint64_t operator()(std::uint32_t level) const {
    return static_cast<std::uint64_t>(elias_length(level));
  }
};

__global__ void elias_total_kernel(const std::uint32_t* level, const std::uint64_t* offsets, std::size_t d,
                                   std::uint64_t* bits) {
  *bits = offsets[d - 1] + static_cast<std::uint64_t>(elias_length(level[d - 1]));
}

// One thread per 64-bit word of the stream: the codes that overlap it (found by a binary search
// of the offsets), OR-ed in; no atomics, and the padding after the last code stays zero. Written
// as two u32 halves (the stream sits 4-byte aligned in the message).
__global__ void elias_words_kernel(const float* x, const std::uint32_t* level, const std::uint64_t* offsets,
                                   std::size_t d, std::size_t words, std::uint32_t* out) {
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t begin = 64 * static_cast<std::uint64_t>(w), end = begin + 64;
    std::size_t lo = 0, hi = d;  // the last coordinate whose code starts at or before `begin`
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (offsets[mid] <= begin) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    std::uint64_t word = 0;
    for (std::size_t i = lo; i < d && offsets[i] < end; ++i) {
      const std::uint64_t code = elias_code(level[i], x[i]);
      const std::uint64_t at = offsets[i];
      word |= at >= begin ? code << (at - begin) : code >> (begin - at);  // shifts < 64: a code is ≤ 34 bits
    }
    out[2 * w] = static_cast<std::uint32_t>(word);
    out[2 * w + 1] = static_cast<std::uint32_t>(word >> 32);
  }
}

std::size_t elias_scan_bytes(std::size_t d) {
  std::size_t bytes = 0;
  cub::DeviceScan::ExclusiveSum(
      nullptr, bytes, thrust::make_transform_iterator(static_cast<const std::uint32_t*>(nullptr), EliasLength{}),
      static_cast<std::uint64_t*>(nullptr), static_cast<std::int64_t>(d));
  return bytes;
}

// ---- top-k ------------------------------------------------------------------------------------------

constexpr int kTopkBins = 2048;
constexpr unsigned kTopkThreads = 512;

struct TopkState {
  std::uint32_t prefix;     // the key bits chosen so far
  std::uint32_t remaining;  // entries still to take at or below the prefix
  std::uint32_t threshold;  // the k-th largest key (after the last pass)
  std::uint32_t equal;      // entries with that key
  std::uint32_t cutoff;     // the last index taken among them
  std::uint32_t pad[3];
};

__device__ inline std::uint32_t key_at(const float* x, std::size_t i) {
  return logic::magnitude_key(__float_as_uint(x[i]));
}

// Histogram of digit (key >> shift) & mask over the entries whose key >> prefix_shift is the
// state's prefix (every entry when prefix_shift ≥ 32), in shared memory, then added to `histogram`.
// (Aggregating the lanes that share a bin with __match_any_sync first was measured slower on an
// H200: the match on every entry made the first pass compute-bound, 375 µs at d = 2^26.)
__global__ void topk_histogram_kernel(const float* x, std::size_t n, int shift, std::uint32_t mask, int prefix_shift,
                                      const TopkState* state, std::uint32_t* histogram) {
  __shared__ std::uint32_t local[kTopkBins];
  for (unsigned b = threadIdx.x; b <= mask; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const bool filter = prefix_shift < 32;
  const std::uint32_t prefix = filter ? state->prefix : 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  constexpr int kAhead = 8;
  constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += kAhead * stride) {
    std::uint32_t keys[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const std::size_t at = i + static_cast<std::size_t>(u) * stride;
      keys[u] = at < n ? key_at(x, at) : kNone;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (keys[u] == kNone || (filter && (keys[u] >> prefix_shift) != prefix)) continue;
      atomicAdd(&local[(keys[u] >> shift) & mask], 1u);
    }
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b <= mask; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&histogram[b], local[b]);
  }
}

// One warp: the digit whose bin holds the `remaining`-th largest entry (bins scanned from the top),
// appended to the prefix; the histogram is zeroed for the next pass.
__global__ void topk_pick_kernel(std::uint32_t* histogram, int bins, int digit_bits, int first, std::uint32_t k,
                                 int last, TopkState* state) {
  const unsigned lane = threadIdx.x;
  const std::uint32_t remaining = first ? k : state->remaining;
  const int per_lane = bins / 32;
  // Lane l owns bins [bins − (l + 1)·per_lane, bins − l·per_lane): lane 0 the top ones.
  const int top = bins - static_cast<int>(lane) * per_lane - 1;
  std::uint32_t own = 0;
  for (int b = top; b > top - per_lane; --b) own += histogram[b];
  std::uint32_t inclusive = own;
  for (unsigned offset = 1; offset < 32; offset *= 2) {
    const std::uint32_t other = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  const std::uint32_t exclusive = inclusive - own;
  const unsigned found = __ballot_sync(kFullMask, inclusive >= remaining);
  const unsigned owner = found == 0 ? 31u : static_cast<unsigned>(__ffs(static_cast<int>(found)) - 1);
  if (lane == owner) {
    std::uint32_t above = exclusive;
    int chosen = top - per_lane + 1;
    for (int b = top; b > top - per_lane; --b) {
      if (above + histogram[b] >= remaining) {
        chosen = b;
        break;
      }
      above += histogram[b];
    }
    const std::uint32_t prefix = first ? 0u : state->prefix;
    state->prefix = (prefix << digit_bits) | static_cast<std::uint32_t>(chosen);
    state->remaining = remaining - above;
    if (last) {
      state->threshold = state->prefix;
      state->equal = histogram[chosen];
      state->cutoff = 0xFFFFFFFFu;
    }
  }
  __syncwarp();
  for (int b = static_cast<int>(lane); b < bins; b += 32) histogram[b] = 0;
}

struct TopkKeep {
  const float* x;
  const TopkState* state;
  __device__ bool operator()(std::uint32_t i) const {
    const std::uint32_t key = key_at(x, i);
    return key > state->threshold || (key == state->threshold && i <= state->cutoff);
  }
};

struct TopkTie {
  const float* x;
  const TopkState* state;
  __device__ bool operator()(std::uint32_t i) const { return key_at(x, i) == state->threshold; }
};

__global__ void topk_cutoff_kernel(const std::uint32_t* ties, TopkState* state) {
  state->cutoff = ties[state->remaining - 1];
}

__global__ void gather_kernel(const float* x, const std::uint32_t* indices, std::size_t k, std::uint32_t* values) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    values[j] = __float_as_uint(x[indices[j]]);
  }
}

// The sampled path. Sample i is x[i·stride].
__global__ void sample_kernel(const float* x, std::size_t count, std::size_t stride, float* sample) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    sample[i] = x[i * stride];
  }
}

// Appends every index whose key is at least the state's threshold to `candidates` (in no particular
// order), counting all of them in *count even past `capacity`. A block takes a tile of
// blockDim.x · kAhead entries, stages its candidates in shared memory (a shared counter per warp
// step) and reserves their places with one global atomic per tile: one per warp step, with ~1/3 of
// the warp steps holding a candidate at k = d/100, serialised on one word of L2 and took ~420 µs
// at d = 2^26 on an H200.
constexpr int kCandidateAhead = 8;
__global__ void candidates_kernel(const float* x, std::size_t n, const TopkState* state, std::uint32_t* candidates,
                                  std::uint32_t capacity, std::uint32_t* count) {
  __shared__ std::uint32_t staged[kTopkThreads * kCandidateAhead];
  __shared__ std::uint32_t tile_count, tile_base;
  const std::uint32_t threshold = state->threshold;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t tile = static_cast<std::size_t>(blockDim.x) * kCandidateAhead;
  for (std::size_t start = blockIdx.x * tile; start < n; start += gridDim.x * tile) {
    if (threadIdx.x == 0) tile_count = 0;
    bool take[kCandidateAhead];
#pragma unroll
    for (int u = 0; u < kCandidateAhead; ++u) {
      const std::size_t at = start + static_cast<std::size_t>(u) * blockDim.x + threadIdx.x;
      take[u] = at < n && key_at(x, at) >= threshold;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kCandidateAhead; ++u) {
      const unsigned votes = __ballot_sync(kFullMask, take[u]);
      if (votes == 0) continue;
      const int leader = __ffs(static_cast<int>(votes)) - 1;
      std::uint32_t first = 0;
      if (static_cast<int>(lane) == leader)
        first = atomicAdd(&tile_count, static_cast<std::uint32_t>(__popc(static_cast<int>(votes))));
      first = __shfl_sync(kFullMask, first, leader);
      if (take[u]) {
        staged[first + static_cast<std::uint32_t>(__popc(static_cast<int>(votes & ((1u << lane) - 1))))] =
            static_cast<std::uint32_t>(start + static_cast<std::size_t>(u) * blockDim.x + threadIdx.x);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) tile_base = tile_count == 0 ? 0u : atomicAdd(count, tile_count);
    __syncthreads();
    for (std::uint32_t t = threadIdx.x; t < tile_count; t += blockDim.x) {
      if (tile_base + t < capacity) candidates[tile_base + t] = staged[t];
    }
    __syncthreads();
  }
}

__global__ void gather_floats_kernel(const float* x, const std::uint32_t* indices, std::size_t count, float* out) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[j] = x[indices[j]];
  }
}

// Positions among the candidates back to indices and values.
__global__ void map_kernel(const std::uint32_t* positions, std::size_t k, const std::uint32_t* candidates,
                           const float* candidate_values, std::uint32_t* indices, std::uint32_t* values) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    indices[j] = candidates[positions[j]];
    values[j] = __float_as_uint(candidate_values[positions[j]]);
  }
}

std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

std::size_t sort_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
                                 static_cast<std::uint32_t*>(nullptr), static_cast<std::int64_t>(n));
  return bytes;
}

std::size_t select_temp_bytes(std::size_t n) {
  std::size_t keep = 0, tie = 0;
  cub::DeviceSelect::If(nullptr, keep, thrust::counting_iterator<std::uint32_t>(0),
                        static_cast<std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
                        static_cast<std::int64_t>(n), TopkKeep{nullptr, nullptr});
  cub::DeviceSelect::If(nullptr, tie, thrust::counting_iterator<std::uint32_t>(0), static_cast<std::uint32_t*>(nullptr),
                        static_cast<std::uint32_t*>(nullptr), static_cast<std::int64_t>(n), TopkTie{nullptr, nullptr});
  return keep > tie ? keep : tie;
}

// ---- sign streams, threshold, gathers -------------------------------------------------------------

// A warp writes 4 consecutive words per step: 4 loads per lane in flight, then 4 ballots.
__global__ void signs_kernel(const float* x, std::size_t d, std::size_t words, std::uint32_t* out) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warp = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  for (std::size_t first = 4 * warp; first < words; first += 4 * warps) {
    bool bits[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const std::size_t i = (first + static_cast<std::size_t>(u)) * 32 + lane;
      bits[u] = i < d && !(x[i] < 0.0f);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const unsigned word = __ballot_sync(kFullMask, bits[u]);
      if (lane == static_cast<unsigned>(u) && first + static_cast<std::size_t>(u) < words) {
        out[first + static_cast<std::size_t>(u)] = word;
      }
    }
  }
}

struct ThresholdKeep {
  const float* x;
  float tau;
  __device__ bool operator()(std::uint32_t i) const { return !(fabsf(x[i]) < tau); }
};

// A NaN entry keeps its bits, quieted, as the host's multiplication leaves it (x86 and ARM return
// the NaN operand; the GPU would return its canonical NaN).
__global__ void scaled_gather_kernel(const float* x, const std::uint32_t* indices, std::size_t count, float scale,
                                     std::uint32_t* values) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = x[indices[j]];
    values[j] = v != v ? (__float_as_uint(v) | 0x00400000u) : __float_as_uint(rn::mul_rn(scale, v));
  }
}

std::size_t threshold_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<std::uint32_t>(0),
                        static_cast<std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
                        static_cast<std::int64_t>(n), ThresholdKeep{nullptr, 0.0f});
  return bytes;
}

// ---- DGC's accumulation, and the sparse codecs' memory ----------------------------------------------

// u ← m·u + f·g, v ← v + u, each product and sum rounded to nearest (f the segment's clipping factor,
// 1 without factors), as detail::momentum_accumulate.
__global__ void momentum_accumulate_kernel(const float* g, std::size_t d, const BallotCodecSegment* segments,
                                           std::size_t num_segments, const float* factors, float m, float* u,
                                           float* v) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float factor = 1.0f;
    if (factors != nullptr) factor = factors[num_segments == 1 ? 0 : segment_of(segments, num_segments, i)];
    const float momentum = rn::add_rn(rn::mul_rn(m, u[i]), rn::mul_rn(factor, g[i]));
    u[i] = momentum;
    v[i] = rn::add_rn(v[i], momentum);
  }
}

__global__ void zero_at_kernel(const std::uint32_t* indices, std::size_t count, float* a, float* b) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    a[indices[j]] = 0.0f;
    if (b != nullptr) b[indices[j]] = 0.0f;
  }
}

// ---- decoders ---------------------------------------------------------------------------------------

__global__ void sign_add_kernel(const std::uint32_t* words, std::size_t d, const BallotCodecSegment* segments,
                                std::size_t num_segments, int pairs, const float* unit, float* accumulator) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t k = num_segments == 1 ? 0 : segment_of(segments, num_segments, i);
    const bool bit = (words[i / 32] >> (i % 32)) & 1u;
    const float value = pairs ? unit[2 * k + (bit ? 0 : 1)] : (bit ? unit[k] : -unit[k]);
    accumulator[i] = rn::add_rn(accumulator[i], value);
  }
}

__device__ inline bool stream_bit(const std::uint32_t* words, std::size_t i) {
  return (words[i / 32] >> (i % 32)) & 1u;
}

template <int kMode>
__global__ void dequantize_add_kernel(const std::uint32_t* streams, std::size_t stream_words, int planes, std::size_t d,
                                      const BallotCodecSegment* segments, std::size_t num_segments, const float* unit,
                                      float* accumulator) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t k = num_segments == 1 ? 0 : segment_of(segments, num_segments, i);
    const float sign = stream_bit(streams, i) ? 1.0f : -1.0f;
    if (kMode == 0) {
      std::uint32_t level = 0;
      for (int p = 0; p < planes; ++p) {
        level |= static_cast<std::uint32_t>(stream_bit(streams + stream_words * static_cast<std::size_t>(1 + p), i))
                 << p;
      }
      accumulator[i] = rn::add_rn(accumulator[i], rn::mul_rn(rn::mul_rn(unit[k], sign), static_cast<float>(level)));
    } else {
      const bool keep = stream_bit(streams + stream_words, i);
      accumulator[i] = rn::add_rn(accumulator[i], keep ? rn::mul_rn(unit[k], sign) : 0.0f);
    }
  }
}

__global__ void add_kernel(const float* a, const float* b, std::size_t n, float* out) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = rn::add_rn(a[i], b[i]);
  }
}

__global__ void zero_non_finite_kernel(float* x, std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(x[i])) x[i] = 0.0f;
  }
}

__global__ void cast_kernel(const float* x, std::size_t d, int format, std::uint8_t* out) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t bits = reinterpret_cast<const std::uint32_t*>(x)[i];
    if (format == 0) {
      reinterpret_cast<std::uint32_t*>(out)[i] = bits;
    } else {
      const float value = logic::bits_float(bits);
      reinterpret_cast<std::uint16_t*>(out)[i] = format == 1 ? logic::fp16_of(value) : logic::bf16_of(value);
    }
  }
}

__global__ void cast_add_kernel(const std::uint8_t* values, std::size_t d, int format, float weight,
                                float* accumulator) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float value;
    if (format == 0) {
      value = logic::bits_float(reinterpret_cast<const std::uint32_t*>(values)[i]);
    } else {
      const std::uint16_t half = reinterpret_cast<const std::uint16_t*>(values)[i];
      value = format == 1 ? logic::float_of_fp16(half) : logic::float_of_bf16(half);
    }
    accumulator[i] = rn::add_rn(accumulator[i], rn::mul_rn(weight, value));
  }
}

__global__ void units_kernel(const std::uint8_t* wire_scales, std::size_t count, float divisor, float weight,
                             float* unit) {
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unit[k] = rn::mul_rn(weight, __fdiv_rn(reinterpret_cast<const float*>(wire_scales)[k], divisor));
  }
}

__global__ void sparse_add_kernel(const std::uint32_t* indices, const std::uint32_t* values, std::size_t count,
                                  const std::uint64_t* first_pair, const std::uint64_t* offsets,
                                  std::size_t num_segments, float weight, float* accumulator) {
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t lo = 0, hi = num_segments;
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (first_pair[mid] <= j) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    float* at = accumulator + offsets[lo] + indices[j];
    *at = rn::add_rn(*at, rn::mul_rn(weight, __uint_as_float(values[j])));
  }
}

// ---- top-k, host side ----------------------------------------------------------------------------

struct Scratch {
  std::uint32_t* histogram;
  TopkState* state;
  std::uint32_t* counters;
  std::uint32_t* ties;
  void* temp;
  std::size_t temp_bytes;
};

unsigned device_grid(std::size_t n) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const unsigned wanted = grid_for(n, kTopkThreads);
  return wanted < static_cast<unsigned>(4 * sms) ? wanted : static_cast<unsigned>(4 * sms);
}

// Three histogram passes of 11, 11 and 9 bits over the 31-bit key of values[0, n): the state then
// holds the key of the k-th largest (threshold), how many entries above it (k − remaining) and how
// many equal to it. Zeroes the histogram first; leaves it zeroed.
int radix_passes(const float* values, std::size_t n, std::size_t k, const Scratch& scratch, cudaStream_t stream) {
  if (const int error = static_cast<int>(cudaMemsetAsync(scratch.histogram, 0, 4 * kTopkBins, stream))) return error;
  struct Pass {
    int shift, digit_bits, prefix_shift;
  };
  constexpr Pass kPasses[3] = {{20, 11, 32}, {9, 11, 20}, {0, 9, 9}};
  const unsigned grid = device_grid(n);
  for (int p = 0; p < 3; ++p) {
    const Pass pass = kPasses[p];
    const std::uint32_t mask = (1u << pass.digit_bits) - 1;
    topk_histogram_kernel<<<grid, kTopkThreads, 0, stream>>>(values, n, pass.shift, mask, pass.prefix_shift,
                                                             scratch.state, scratch.histogram);
    if (const int error = last_error()) return error;
    topk_pick_kernel<<<1, 32, 0, stream>>>(scratch.histogram, 1 << pass.digit_bits, pass.digit_bits, p == 0,
                                           static_cast<std::uint32_t>(k), p == 2, scratch.state);
    if (const int error = last_error()) return error;
  }
  return 0;
}

// The positions of the k largest magnitudes of values[0, n), increasing, ties to the lowest position.
int select_positions(const float* values, std::size_t n, std::size_t k, const Scratch& scratch,
                     std::uint32_t* positions, cudaStream_t stream) {
  if (const int error = radix_passes(values, n, k, scratch, stream)) return error;
  TopkState host_state;
  if (const int error = static_cast<int>(
          cudaMemcpyAsync(&host_state, scratch.state, sizeof(TopkState), cudaMemcpyDeviceToHost, stream))) {
    return error;
  }
  if (const int error = static_cast<int>(cudaStreamSynchronize(stream))) return error;
  const thrust::counting_iterator<std::uint32_t> all(0);
  std::size_t temp_bytes = scratch.temp_bytes;
  if (host_state.equal > host_state.remaining) {
    // More entries share the k-th magnitude than are still needed: the lowest positions among them.
    if (const int error = static_cast<int>(cub::DeviceSelect::If(scratch.temp, temp_bytes, all, scratch.ties,
                                                                 scratch.counters + 1, static_cast<std::int64_t>(n),
                                                                 TopkTie{values, scratch.state}, stream))) {
      return error;
    }
    topk_cutoff_kernel<<<1, 1, 0, stream>>>(scratch.ties, scratch.state);
    if (const int error = last_error()) return error;
  }
  return static_cast<int>(cub::DeviceSelect::If(scratch.temp, temp_bytes, all, positions, scratch.counters + 1,
                                                static_cast<std::int64_t>(n), TopkKeep{values, scratch.state}, stream));
}

// The sampled path: worth it for a large n and a small k. samples = 0 means the full selection.
struct SampledPlan {
  std::size_t samples = 0, sample_rank = 0, capacity = 0;
};
constexpr std::size_t kSamples = 65536;
SampledPlan plan_for(std::size_t n, std::size_t k) {
  SampledPlan plan;
  if (n < 16 * kSamples || k > n / 8) return plan;
  plan.samples = kSamples;
  // 25 % above the sample's share of k, plus 8: for k/n = 1 % the rank is ~830, its standard
  // deviation ~30, so fewer than k candidates is a 7-sigma event (and then the full path runs).
  const std::size_t per_sample = n / kSamples;
  plan.sample_rank = std::min(kSamples, (k + k / 4 + per_sample - 1) / per_sample + 8);
  plan.capacity = std::min(n, 2 * k + 16 * per_sample + 4096);
  return plan;
}
// The largest buffers any k needs for this n (the workspace is sized once per n).
SampledPlan largest_plan(std::size_t n) {
  SampledPlan plan = plan_for(n, n / 8);
  if (plan.samples > 0) plan.capacity = std::min(n, 2 * (n / 8) + 16 * (n / kSamples) + 4096);
  return plan;
}

}  // namespace

extern "C" {

int ballot_codec_cuda_factors(int mode, int what, const float* x, const BallotCodecSegment* d_segments,
                              std::size_t num_segments, std::size_t total_chunks, double* scratch, std::uint32_t* words,
                              float parameter, std::uint8_t* wire_scales, float* inverse, float* limit,
                              std::uint8_t* keep_all, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (num_segments == 0) return 0;
  if (total_chunks > 0) {
    const unsigned grid = static_cast<unsigned>((total_chunks * logic::kSumLanes + 255) / 256);
    double* first = scratch;
    double* second = scratch + total_chunks;
    switch (what) {
      case 1:
        chunk_kernel<kSquare, kNoTerm, kNoWord>
            <<<grid, 256, 0, stream>>>(x, d_segments, num_segments, total_chunks, first, second, words);
        break;
      case 4:
        chunk_kernel<kNoTerm, kNoTerm, kMaxBits>
            <<<grid, 256, 0, stream>>>(x, d_segments, num_segments, total_chunks, first, second, words);
        break;
      case 7:
        chunk_kernel<kSquare, kValue, kMaxBits>
            <<<grid, 256, 0, stream>>>(x, d_segments, num_segments, total_chunks, first, second, words);
        break;
      case 8:
        chunk_kernel<kNoTerm, kAbs, kNoWord>
            <<<grid, 256, 0, stream>>>(x, d_segments, num_segments, total_chunks, first, second, words);
        break;
      case 16:
        chunk_kernel<kNonNegative, kNegative, kNegatives>
            <<<grid, 256, 0, stream>>>(x, d_segments, num_segments, total_chunks, first, second, words);
        break;
      default:
        return static_cast<int>(cudaErrorInvalidValue);
    }
    if (const int error = last_error()) return error;
  }
  factors_kernel<<<static_cast<unsigned>(num_segments), 1024, 0, stream>>>(
      mode, what, d_segments, total_chunks, scratch, words, parameter, wire_scales, inverse, limit, keep_all);
  return last_error();
}

int ballot_codec_cuda_quantize(int mode, const float* x, std::size_t d, const BallotCodecSegment* d_segments,
                               std::size_t num_segments, const float* inverse, const float* limit,
                               const std::uint8_t* keep_all, float s, int planes, std::uint64_t seed,
                               std::uint64_t rng_stream, std::uint64_t first_block, std::uint8_t* streams,
                               std::size_t stream_bytes, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (d == 0) return 0;
  const std::size_t pairs = ((d + 127) / 128 + 1) / 2;
  const unsigned grid = grid_for(32 * pairs, 256);
  auto* words = reinterpret_cast<std::uint32_t*>(streams);
  if (mode == 0) {
    quantize_kernel<0><<<grid, 256, 0, stream>>>(x, d, d_segments, num_segments, inverse, limit, keep_all, s, planes,
                                                 seed, rng_stream, first_block, words, stream_bytes / 4);
  } else {
    quantize_kernel<1><<<grid, 256, 0, stream>>>(x, d, d_segments, num_segments, inverse, limit, keep_all, s, planes,
                                                 seed, rng_stream, first_block, words, stream_bytes / 4);
  }
  return last_error();
}

std::size_t ballot_codec_cuda_topk_workspace(std::size_t n) {
  const SampledPlan plan = largest_plan(n);
  // histogram, state, counters, the tie list (n indices at most), CUB's temporary storage, and the
  // sampled path's sample, candidates (twice) and their values and positions.
  const std::size_t c = plan.capacity;
  const std::size_t temp = std::max(select_temp_bytes(n), sort_temp_bytes(c));
  return align_up(4 * kTopkBins) + align_up(sizeof(TopkState)) + align_up(8) + align_up(4 * n) + align_up(temp) +
         align_up(4 * plan.samples) + 4 * align_up(4 * c);
}

int ballot_codec_cuda_topk(const float* x, std::size_t n, std::size_t k, void* workspace, std::size_t workspace_bytes,
                           std::uint8_t* d_indices, std::uint8_t* d_values, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (k == 0) return 0;
  if (workspace_bytes < ballot_codec_cuda_topk_workspace(n) || n > 0xFFFFFFFFu || k > n) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const SampledPlan limits = largest_plan(n);
  const SampledPlan plan = plan_for(n, k);
  auto* base = static_cast<std::uint8_t*>(workspace);
  const auto take = [&base](std::size_t bytes) {
    std::uint8_t* at = base;
    base += align_up(bytes);
    return at;
  };
  Scratch scratch;
  scratch.histogram = reinterpret_cast<std::uint32_t*>(take(4 * kTopkBins));
  scratch.state = reinterpret_cast<TopkState*>(take(sizeof(TopkState)));
  scratch.counters = reinterpret_cast<std::uint32_t*>(take(8));
  scratch.ties = reinterpret_cast<std::uint32_t*>(take(4 * n));
  scratch.temp_bytes = std::max(select_temp_bytes(n), sort_temp_bytes(limits.capacity));
  scratch.temp = take(scratch.temp_bytes);
  auto* sample = reinterpret_cast<float*>(take(4 * limits.samples));
  auto* candidates = reinterpret_cast<std::uint32_t*>(take(4 * limits.capacity));
  auto* sorted = reinterpret_cast<std::uint32_t*>(take(4 * limits.capacity));
  auto* candidate_values = reinterpret_cast<float*>(take(4 * limits.capacity));
  auto* positions = reinterpret_cast<std::uint32_t*>(take(4 * limits.capacity));
  auto* out_indices = reinterpret_cast<std::uint32_t*>(d_indices);
  auto* out_values = reinterpret_cast<std::uint32_t*>(d_values);

  if (plan.samples > 0) {
    // A threshold a little below the k-th magnitude from a strided sample, the entries at or above
    // it as candidates, and the exact selection among them (in index order, so ties still go to the
    // lowest index). Every entry with the k-th magnitude is a candidate whenever there are at
    // least k of them; if there are fewer, or more than fit, the full selection below runs.
    sample_kernel<<<grid_for(plan.samples, 256), 256, 0, stream>>>(x, plan.samples, n / plan.samples, sample);
    if (const int error = last_error()) return error;
    if (const int error = radix_passes(sample, plan.samples, plan.sample_rank, scratch, stream)) return error;
    if (const int error = static_cast<int>(cudaMemsetAsync(scratch.counters, 0, 8, stream))) return error;
    candidates_kernel<<<device_grid(n), kTopkThreads, 0, stream>>>(
        x, n, scratch.state, candidates, static_cast<std::uint32_t>(plan.capacity), scratch.counters);
    if (const int error = last_error()) return error;
    std::uint32_t count = 0;
    if (const int error =
            static_cast<int>(cudaMemcpyAsync(&count, scratch.counters, 4, cudaMemcpyDeviceToHost, stream))) {
      return error;
    }
    if (const int error = static_cast<int>(cudaStreamSynchronize(stream))) return error;
    if (count >= k && count <= plan.capacity) {
      int end_bit = 1;
      while (end_bit < 32 && (std::size_t{1} << end_bit) < n) ++end_bit;
      if (const int error =
              static_cast<int>(cub::DeviceRadixSort::SortKeys(scratch.temp, scratch.temp_bytes, candidates, sorted,
                                                              static_cast<std::int64_t>(count), 0, end_bit, stream))) {
        return error;
      }
      gather_floats_kernel<<<grid_for(count, 256), 256, 0, stream>>>(x, sorted, count, candidate_values);
      if (const int error = last_error()) return error;
      if (const int error = select_positions(candidate_values, count, k, scratch, positions, stream)) return error;
      map_kernel<<<grid_for(k, 256), 256, 0, stream>>>(positions, k, sorted, candidate_values, out_indices, out_values);
      return last_error();
    }
  }
  if (const int error = select_positions(x, n, k, scratch, out_indices, stream)) return error;
  gather_kernel<<<grid_for(k, 256), 256, 0, stream>>>(x, out_indices, k, out_values);
  return last_error();
}

int ballot_codec_cuda_dequantize_add(int mode, const std::uint8_t* streams, std::size_t stream_bytes, int planes,
                                     std::size_t d, const BallotCodecSegment* d_segments, std::size_t num_segments,
                                     const float* unit, float* accumulator, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (d == 0) return 0;
  const auto* words = reinterpret_cast<const std::uint32_t*>(streams);
  const unsigned grid = grid_for(d, 256);
  if (mode == 0) {
    dequantize_add_kernel<0>
        <<<grid, 256, 0, stream>>>(words, stream_bytes / 4, planes, d, d_segments, num_segments, unit, accumulator);
  } else {
    dequantize_add_kernel<1>
        <<<grid, 256, 0, stream>>>(words, stream_bytes / 4, planes, d, d_segments, num_segments, unit, accumulator);
  }
  return last_error();
}

int ballot_codec_cuda_signs(const float* x, std::size_t d, std::size_t stream_bytes, std::uint8_t* out,
                            void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const std::size_t words = stream_bytes / 4;
  if (words == 0) return 0;
  const std::size_t warps = (words + 3) / 4;
  signs_kernel<<<grid_for(32 * warps, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(
      x, d, words, reinterpret_cast<std::uint32_t*>(out));
  return last_error();
}

std::size_t ballot_codec_cuda_threshold_workspace(std::size_t n) { return align_up(threshold_temp_bytes(n)); }

int ballot_codec_cuda_threshold(const float* x, std::size_t n, float tau, void* workspace, std::size_t workspace_bytes,
                                std::uint8_t* d_indices, std::uint32_t* d_count, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (n == 0) return static_cast<int>(cudaMemsetAsync(d_count, 0, 4, stream));
  std::size_t temp_bytes = workspace_bytes;
  return static_cast<int>(cub::DeviceSelect::If(workspace, temp_bytes, thrust::counting_iterator<std::uint32_t>(0),
                                                reinterpret_cast<std::uint32_t*>(d_indices), d_count,
                                                static_cast<std::int64_t>(n), ThresholdKeep{x, tau}, stream));
}

int ballot_codec_cuda_gather(const float* x, const std::uint8_t* indices, std::size_t count, int scaled, float scale,
                             std::uint8_t* values, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return 0;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  const auto* at = reinterpret_cast<const std::uint32_t*>(indices);
  auto* out = reinterpret_cast<std::uint32_t*>(values);
  if (scaled) {
    scaled_gather_kernel<<<grid_for(count, 256), 256, 0, stream>>>(x, at, count, scale, out);
  } else {
    gather_kernel<<<grid_for(count, 256), 256, 0, stream>>>(x, at, count, out);
  }
  return last_error();
}

int ballot_codec_cuda_sign_add(const std::uint8_t* signs, std::size_t d, const BallotCodecSegment* d_segments,
                               std::size_t num_segments, int pairs, const float* unit, float* accumulator,
                               void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (d == 0) return 0;
  sign_add_kernel<<<grid_for(d, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(
      reinterpret_cast<const std::uint32_t*>(signs), d, d_segments, num_segments, pairs, unit, accumulator);
  return last_error();
}

int ballot_codec_cuda_add(const float* a, const float* b, std::size_t n, float* out, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (n == 0) return 0;
  add_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(a, b, n, out);
  return last_error();
}

int ballot_codec_cuda_zero_non_finite(float* x, std::size_t n, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (n == 0) return 0;
  zero_non_finite_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(x, n);
  return last_error();
}

int ballot_codec_cuda_cast(int format, const float* x, std::size_t d, std::uint8_t* out, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (d == 0) return 0;
  cast_kernel<<<grid_for(d, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(x, d, format, out);
  return last_error();
}

int ballot_codec_cuda_cast_add(int format, const std::uint8_t* values, std::size_t d, float weight, float* accumulator,
                               void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (d == 0) return 0;
  cast_add_kernel<<<grid_for(d, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(values, d, format, weight,
                                                                                          accumulator);
  return last_error();
}

int ballot_codec_cuda_units(const std::uint8_t* wire_scales, std::size_t count, float divisor, float weight,
                            float* unit, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return 0;
  units_kernel<<<grid_for(count, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(wire_scales, count, divisor,
                                                                                           weight, unit);
  return last_error();
}

std::size_t ballot_codec_cuda_elias_workspace(std::size_t d) {
  return align_up(4 * d) + align_up(8 * d) + align_up(elias_scan_bytes(d));
}

int ballot_codec_cuda_elias_plan(const float* x, std::size_t d, const BallotCodecSegment* d_segments,
                                 std::size_t num_segments, const float* inverse, float s, std::uint64_t seed,
                                 std::uint64_t rng_stream, std::uint64_t first_block, void* workspace,
                                 std::size_t workspace_bytes, std::uint64_t* d_bits, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (d == 0) return static_cast<int>(cudaMemsetAsync(d_bits, 0, 8, stream));
  if (workspace_bytes < ballot_codec_cuda_elias_workspace(d)) return static_cast<int>(cudaErrorInvalidValue);
  auto* base = static_cast<std::uint8_t*>(workspace);
  auto* level = reinterpret_cast<std::uint32_t*>(base);
  auto* offsets = reinterpret_cast<std::uint64_t*>(base + align_up(4 * d));
  void* temp = base + align_up(4 * d) + align_up(8 * d);
  qsgd_levels_kernel<<<grid_for(16 * ((d + 127) / 128), 256), 256, 0, stream>>>(
      x, d, d_segments, num_segments, inverse, s, seed, rng_stream, first_block, level);
  if (const int error = last_error()) return error;
  std::size_t temp_bytes = elias_scan_bytes(d);
  if (const int error = static_cast<int>(cub::DeviceScan::ExclusiveSum(
          temp, temp_bytes, thrust::make_transform_iterator(static_cast<const std::uint32_t*>(level), EliasLength{}),
          offsets, static_cast<std::int64_t>(d), stream))) {
    return error;
  }
  elias_total_kernel<<<1, 1, 0, stream>>>(level, offsets, d, d_bits);
  return last_error();
}

int ballot_codec_cuda_elias_write(const float* x, std::size_t d, const void* workspace, std::size_t words,
                                  std::uint8_t* out, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (words == 0) return 0;
  const auto* base = static_cast<const std::uint8_t*>(workspace);
  const auto* level = reinterpret_cast<const std::uint32_t*>(base);
  const auto* offsets = reinterpret_cast<const std::uint64_t*>(base + align_up(4 * d));
  elias_words_kernel<<<grid_for(words, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(
      x, level, offsets, d, words, reinterpret_cast<std::uint32_t*>(out));
  return last_error();
}

int ballot_codec_cuda_momentum_accumulate(const float* g, std::size_t d, const BallotCodecSegment* d_segments,
                                          std::size_t num_segments, const float* factors, float m, float* u, float* v,
                                          void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (d == 0) return 0;
  momentum_accumulate_kernel<<<grid_for(d, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(
      g, d, d_segments, num_segments, factors, m, u, v);
  return last_error();
}

int ballot_codec_cuda_zero_at(const std::uint8_t* indices, std::size_t count, float* a, float* b, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  if (count == 0) return 0;
  zero_at_kernel<<<grid_for(count, 256), 256, 0, static_cast<cudaStream_t>(stream_handle)>>>(
      reinterpret_cast<const std::uint32_t*>(indices), count, a, b);
  return last_error();
}

int ballot_codec_cuda_sparse_add(const std::uint8_t* indices, const std::uint8_t* values, std::size_t count,
                                 const std::uint64_t* first_pair, const std::uint64_t* offsets,
                                 std::size_t num_segments, float weight, float* accumulator, void* stream_handle) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (count == 0) return 0;
  sparse_add_kernel<<<grid_for(count, 256), 256, 0, stream>>>(reinterpret_cast<const std::uint32_t*>(indices),
                                                              reinterpret_cast<const std::uint32_t*>(values), count,
                                                              first_pair, offsets, num_segments, weight, accumulator);
  return last_error();
}

}  // extern "C"
