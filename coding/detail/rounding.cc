#include "coding/detail/rounding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "coding/detail/codec_logic.h"
#include "core/enforce.h"
#include "core/philox.h"
#include "kernels/isa.h"

#if defined(__x86_64__)
// GCC 12 reports a false -Wmaybe-uninitialized inside the AVX-512 intrinsics' own headers (clang
// has no such warning).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace ballot::coding::detail {
namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

// ---- scalar reference -------------------------------------------------------------------------

// words[w][j] = word w of Philox block first_block + 16g + j.
void group_words(const RoundingStream& random, std::uint64_t group, std::uint32_t (&words)[4][16]) {
  for (std::uint32_t j = 0; j < 16; ++j) {
    const PhiloxBlock out = philox_stream_block(random.seed, random.stream, random.first_block + 16 * group + j);
    for (int w = 0; w < 4; ++w) words[w][j] = out.v[w];
  }
}

inline std::uint32_t bits_of(const std::uint32_t (&words)[4][16], std::size_t within_group) {
  const std::size_t m = within_group / 16, j = within_group % 16;
  return (words[m / 2][j] >> (16 * (m % 2))) & 0xFFFFu;
}

// The per-coordinate formulas (coding/detail/codec_logic.h, shared with the CUDA encoders); the
// vector lanes below compute exactly these operations.
inline void set_bit(std::uint8_t* stream, std::size_t i) {
  stream[i / 8] = static_cast<std::uint8_t>(stream[i / 8] | (1u << (i % 8)));
}

template <typename PerCoordinate>
void for_each_coordinate(const RoundingStream& random, std::size_t lo, std::size_t hi, PerCoordinate&& fn) {
  std::uint32_t words[4][16];
  for (std::size_t group = lo / kRoundingGroup; group * kRoundingGroup < hi; ++group) {
    group_words(random, group, words);
    const std::size_t base = group * kRoundingGroup;
    const std::size_t end = std::min(hi, base + kRoundingGroup);
    for (std::size_t i = std::max(lo, base); i < end; ++i) fn(i, bits_of(words, i - base));
  }
}

void qsgd_scalar(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv, float s,
                 std::uint8_t* signs, std::uint8_t* planes, std::size_t plane_bytes, int num_planes) {
  for_each_coordinate(random, lo, hi, [&](std::size_t i, std::uint32_t k) {
    if (non_negative(x[i])) set_bit(signs, i);
    const std::uint32_t level = qsgd_level(x[i], k, inv, s);
    for (int p = 0; p < num_planes; ++p) {
      if ((level >> p) & 1u) set_bit(planes + plane_bytes * static_cast<std::size_t>(p), i);
    }
  });
}

void terngrad_scalar(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float limit,
                     float inv, bool keep_all, std::uint8_t* signs, std::uint8_t* keep) {
  for_each_coordinate(random, lo, hi, [&](std::size_t i, std::uint32_t k) {
    if (non_negative(x[i])) set_bit(signs, i);
    if (keep_all || terngrad_keep(x[i], k, limit, inv)) set_bit(keep, i);
  });
}

// Words w of every block, XORed together; the fold is (w0 ^ rotl(w2, 16)) | (w1 ^ rotl(w3, 16)) << 32
// (rotated so that a kernel swapping words 0 and 2, or 1 and 3, does not fold the same).
std::uint64_t fold_of(const std::uint32_t (&words)[4]) {
  const auto rotl16 = [](std::uint32_t w) { return (w << 16) | (w >> 16); };
  return (words[0] ^ rotl16(words[2])) | std::uint64_t{words[1] ^ rotl16(words[3])} << 32;
}

std::uint64_t fold_scalar(const RoundingStream& random, std::uint64_t groups) {
  std::uint32_t folded[4] = {};
  std::uint32_t words[4][16];
  for (std::uint64_t group = 0; group < groups; ++group) {
    group_words(random, group, words);
    for (int w = 0; w < 4; ++w) {
      for (int j = 0; j < 16; ++j) folded[w] ^= words[w][j];
    }
  }
  return fold_of(folded);
}

// Lanes [first, last) of a vector of `width` coordinates starting at `base` that lie in [lo, hi).
struct LaneRange {
  unsigned first, last;
  bool full(unsigned width) const { return first == 0 && last == width; }
};
inline LaneRange lanes_in(std::size_t base, std::size_t width, std::size_t lo, std::size_t hi) {
  const std::size_t first = lo > base ? std::min(width, lo - base) : 0;
  const std::size_t last = hi > base ? std::min(width, hi - base) : 0;
  return {static_cast<unsigned>(first), static_cast<unsigned>(std::max(first, last))};
}

template <typename T>
inline void or_into(std::uint8_t* stream, std::size_t coordinate, T bits) {
  T current;
  std::memcpy(&current, stream + coordinate / 8, sizeof(T));
  current = static_cast<T>(current | bits);
  std::memcpy(stream + coordinate / 8, &current, sizeof(T));
}

#if defined(__x86_64__)

// The hardware prefetcher alone leaves the fused loops waiting on memory (they read 512 bytes of
// input per ~150 instructions of Philox): ask for the input 4 KiB ahead, once per group.
inline void prefetch_ahead(const float* x, std::size_t group, std::size_t hi) {
  constexpr std::size_t kAhead = 1024;  // floats
  const std::size_t at = group * kRoundingGroup + kAhead;
  for (std::size_t line = 0; line < kRoundingGroup; line += 16) {  // 8 cache lines of 64 bytes
    if (at + line < hi) _mm_prefetch(reinterpret_cast<const char*>(x + at + line), _MM_HINT_T0);
  }
}

// ---- AVX-512: 16 Philox blocks (one group) per call, one per lane ----------------------------

#define BALLOT_AVX512 __attribute__((target("avx512f")))

// Philox state of 8 blocks with one 32-bit word in the low half of each 64-bit lane: then
// _mm512_mul_epu32 (which reads only the low halves) yields the full product, whose low half is
// `lo` as it stands and whose high half is one shift away. The high halves of the state lanes
// carry garbage that nothing reads. A round costs 2 multiplies, 2 shifts and 2 three-way XORs
// (vpternlogd 0x96) per 8 blocks. A round is a chain of multiply, shift and XOR latencies, so
// four such 8-block states (two groups) go through the rounds together to keep the units busy.
BALLOT_AVX512 inline void philox_rounds(__m512i (&c)[4][4], const std::uint32_t (&key0)[10],
                                        const std::uint32_t (&key1)[10]) {
  const __m512i mul0 = _mm512_set1_epi64(kMul0), mul1 = _mm512_set1_epi64(kMul1);
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(key0[round]));
    const __m512i k1 = _mm512_set1_epi32(static_cast<int>(key1[round]));
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i product0 = _mm512_mul_epu32(c[h][0], mul0);
      const __m512i product1 = _mm512_mul_epu32(c[h][2], mul1);
      c[h][0] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(product1, 32), c[h][1], k0, 0x96);
      c[h][2] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(product0, 32), c[h][3], k1, 0x96);
      c[h][1] = product1;
      c[h][3] = product0;
    }
  }
}

// Groups `group` and `group + 1`, one block per 32-bit lane: c[q][w] lane j = word w of block
// first + 16(group + q) + j.
BALLOT_AVX512 inline void philox_pair(const RoundingStream& random, std::uint64_t group, __m512i (&c)[2][4]) {
  std::uint32_t key0[10], key1[10];
  key0[0] = static_cast<std::uint32_t>(random.seed);
  key1[0] = static_cast<std::uint32_t>(random.seed >> 32);
  for (int round = 1; round < 10; ++round) {
    key0[round] = key0[round - 1] + kWeyl0;
    key1[round] = key1[round - 1] + kWeyl1;
  }
  const std::uint64_t base = random.first_block + 16 * group;
  const __m512i stream_low = _mm512_set1_epi64(static_cast<std::uint32_t>(random.stream));
  const __m512i stream_high = _mm512_set1_epi64(static_cast<std::uint32_t>(random.stream >> 32));
  __m512i eighth[4][4];
  for (int h = 0; h < 4; ++h) {
    // 64-bit block counters (the carry into the high word comes for free), split into words.
    const __m512i block =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(base + 8 * static_cast<std::uint64_t>(h))),
                         _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    eighth[h][0] = block;
    // The zero-masked form with every lane selected is the same shift; GCC 12's plain
    // _mm512_srli_epi64 passes an undefined vector that its -O1 flow analysis (the debug-asan
    // preset) reports as used uninitialised.
    eighth[h][1] = _mm512_maskz_srli_epi64(static_cast<__mmask8>(0xff), block, 32);
    eighth[h][2] = stream_low;
    eighth[h][3] = stream_high;
  }
  philox_rounds(eighth, key0, key1);
  // Low halves of blocks 0..7, then of blocks 8..15 (per group).
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int q = 0; q < 2; ++q) {
    for (int w = 0; w < 4; ++w) c[q][w] = _mm512_permutex2var_epi32(eighth[2 * q][w], evens, eighth[2 * q + 1][w]);
  }
}

// u = k + 1/2 for vector m of the group (16 coordinates).
BALLOT_AVX512 inline __m512 draws16(const __m512i (&c)[4], int m) {
  const __m512i word = c[m / 2];
  const __m512i k = (m % 2) ? _mm512_srli_epi32(word, 16) : _mm512_and_si512(word, _mm512_set1_epi32(0xFFFF));
  return _mm512_add_ps(_mm512_cvtepi32_ps(k), _mm512_set1_ps(0.5f));
}

BALLOT_AVX512 inline __m512 load16(const float* x, std::size_t base, LaneRange lanes, __mmask16& mask) {
  if (lanes.full(16)) {
    mask = 0xFFFF;
    return _mm512_loadu_ps(x + base);
  }
  mask = static_cast<__mmask16>(((1u << lanes.last) - 1u) & ~((1u << lanes.first) - 1u));
  return _mm512_maskz_loadu_ps(mask, x + base);  // masked-off lanes are not read
}

// The QSGD level of 16 lanes (the scalar qsgd_level, lane-wise).
struct QsgdConstants {
  __m512 inv, s, zero, scale;
};
BALLOT_AVX512 inline __m512i qsgd_level16(__m512 v, __m512 u, const QsgdConstants& k) {
  __m512 r = _mm512_mul_ps(_mm512_abs_ps(v), k.inv);
  r = _mm512_min_ps(r, k.s);  // r < s ? r : s, NaN -> s
  const __m512i whole = _mm512_cvttps_epi32(r);
  const __m512 fraction = _mm512_sub_ps(r, _mm512_cvtepi32_ps(whole));
  const __mmask16 up = _mm512_cmp_ps_mask(u, _mm512_mul_ps(fraction, k.scale), _CMP_LT_OQ);
  return _mm512_mask_add_epi32(whole, up, whole, _mm512_set1_epi32(1));
}

// kPlanes level bit-planes. A group lying wholly inside [lo, hi) owns its two 64-bit words of
// every stream: they are assembled in registers and stored once. Groups cut by lo or hi (segment
// boundaries) go lane-masked through read-modify-write of 16-bit pieces.
template <int kPlanes>
__attribute__((target("avx512f,avx512bw"))) void qsgd_avx512(const RoundingStream& random, const float* x,
                                                             std::size_t lo, std::size_t hi, float inv, float s,
                                                             std::uint8_t* signs, std::uint8_t* planes,
                                                             std::size_t plane_bytes) {
  const QsgdConstants k{_mm512_set1_ps(inv), _mm512_set1_ps(s), _mm512_setzero_ps(), _mm512_set1_ps(kRoundingScale)};
  __m512i pair[2][4];
  const std::size_t start = lo / kRoundingGroup;
  for (std::size_t group = start; group * kRoundingGroup < hi; ++group) {
    prefetch_ahead(x, group, hi);
    if ((group - start) % 2 == 0) philox_pair(random, group, pair);
    const __m512i(&c)[4] = pair[(group - start) % 2];
    const std::size_t first = group * kRoundingGroup;
    if (first >= lo && first + kRoundingGroup <= hi) {
      std::uint64_t words[kPlanes + 1][2] = {};
      if constexpr (kPlanes <= 8) {
        // Levels fit in a byte: 64 of them in one register, then one byte-test per plane gives
        // the plane's 64-bit word.
#pragma GCC unroll 2
        for (int word = 0; word < 2; ++word) {
          __m512i level[4];
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const int m = 4 * word + q;
            const __m512 v = _mm512_loadu_ps(x + first + 16 * m);
            words[0][word] |= std::uint64_t{_mm512_cmp_ps_mask(v, k.zero, _CMP_NLT_UQ)} << (16 * q);
            level[q] = qsgd_level16(v, draws16(c, m), k);
          }
          // Saturating packs (exact: levels <= 255) interleave per 128-bit lane L: dword 4L + q
          // holds coordinates 16q + 4L .. 16q + 4L + 3. One dword permutation restores order.
          const __m512i packed =
              _mm512_packus_epi16(_mm512_packus_epi32(level[0], level[1]), _mm512_packus_epi32(level[2], level[3]));
          const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
          const __m512i bytes = _mm512_permutexvar_epi32(order, packed);
#pragma GCC unroll 8
          for (int p = 0; p < kPlanes; ++p) {
            words[1 + p][word] = _mm512_test_epi8_mask(bytes, _mm512_set1_epi8(static_cast<char>(1 << p)));
          }
        }
      } else {
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
          const __m512 v = _mm512_loadu_ps(x + first + 16 * m);
          const int shift = 16 * (m % 4);
          words[0][m / 4] |= std::uint64_t{_mm512_cmp_ps_mask(v, k.zero, _CMP_NLT_UQ)} << shift;
          const __m512i level = qsgd_level16(v, draws16(c, m), k);
#pragma GCC unroll 16
          for (int p = 0; p < kPlanes; ++p) {
            words[1 + p][m / 4] |= std::uint64_t{_mm512_test_epi32_mask(level, _mm512_set1_epi32(1 << p))} << shift;
          }
        }
      }
      std::memcpy(signs + first / 8, words[0], 16);
#pragma GCC unroll 16
      for (int p = 0; p < kPlanes; ++p) {
        std::memcpy(planes + plane_bytes * static_cast<std::size_t>(p) + first / 8, words[1 + p], 16);
      }
      continue;
    }
    for (int m = 0; m < 8; ++m) {
      const std::size_t base = first + 16 * static_cast<std::size_t>(m);
      const LaneRange lanes = lanes_in(base, 16, lo, hi);
      if (lanes.first == lanes.last) continue;
      __mmask16 in;
      const __m512 v = load16(x, base, lanes, in);
      or_into<std::uint16_t>(signs, base, _mm512_mask_cmp_ps_mask(in, v, k.zero, _CMP_NLT_UQ));
      const __m512i level = qsgd_level16(v, draws16(c, m), k);
      for (int p = 0; p < kPlanes; ++p) {
        const __mmask16 bit = _mm512_mask_test_epi32_mask(in, level, _mm512_set1_epi32(1 << p));
        or_into<std::uint16_t>(planes + plane_bytes * static_cast<std::size_t>(p), base, bit);
      }
    }
  }
}

using QsgdKernel = void (*)(const RoundingStream&, const float*, std::size_t, std::size_t, float, float, std::uint8_t*,
                            std::uint8_t*, std::size_t);
template <int... kPlanes>
QsgdKernel qsgd_avx512_for(int num_planes, std::integer_sequence<int, kPlanes...>) {
  static constexpr QsgdKernel kernels[] = {&qsgd_avx512<kPlanes>...};
  return kernels[num_planes];
}

BALLOT_AVX512 void terngrad_avx512(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi,
                                   float limit, float inv, bool keep_all, std::uint8_t* signs, std::uint8_t* keep) {
  const __m512 vinv = _mm512_set1_ps(inv), vlimit = _mm512_set1_ps(limit), zero = _mm512_setzero_ps();
  const __m512 scale = _mm512_set1_ps(kRoundingScale);
  __m512i pair[2][4];
  // keep = [u < min(|x|, limit)·inv·2^16] lane-wise (the scalar terngrad_keep).
  auto keep16 = [&](const __m512i(&c)[4], __m512 v, int m) BALLOT_AVX512 {
    const __m512 a = _mm512_abs_ps(v);
    const __m512 clipped = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vlimit, _CMP_LT_OQ), vlimit, a);
    const __m512 threshold = _mm512_mul_ps(_mm512_mul_ps(clipped, vinv), scale);
    return _mm512_cmp_ps_mask(draws16(c, m), threshold, _CMP_LT_OQ);
  };
  const std::size_t start = lo / kRoundingGroup;
  for (std::size_t group = start; group * kRoundingGroup < hi; ++group) {
    prefetch_ahead(x, group, hi);
    if (!keep_all && (group - start) % 2 == 0) philox_pair(random, group, pair);
    const __m512i(&c)[4] = pair[(group - start) % 2];
    const std::size_t first = group * kRoundingGroup;
    if (first >= lo && first + kRoundingGroup <= hi) {
      std::uint64_t sign_words[2] = {}, keep_words[2] = {};
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512 v = _mm512_loadu_ps(x + first + 16 * m);
        const int shift = 16 * (m % 4);
        sign_words[m / 4] |= std::uint64_t{_mm512_cmp_ps_mask(v, zero, _CMP_NLT_UQ)} << shift;
        keep_words[m / 4] |= std::uint64_t{keep_all ? __mmask16{0xFFFF} : keep16(c, v, m)} << shift;
      }
      std::memcpy(signs + first / 8, sign_words, 16);
      std::memcpy(keep + first / 8, keep_words, 16);
      continue;
    }
    for (int m = 0; m < 8; ++m) {
      const std::size_t base = first + 16 * static_cast<std::size_t>(m);
      const LaneRange lanes = lanes_in(base, 16, lo, hi);
      if (lanes.first == lanes.last) continue;
      __mmask16 in;
      const __m512 v = load16(x, base, lanes, in);
      or_into<std::uint16_t>(signs, base, _mm512_mask_cmp_ps_mask(in, v, zero, _CMP_NLT_UQ));
      or_into<std::uint16_t>(keep, base, keep_all ? in : static_cast<__mmask16>(in & keep16(c, v, m)));
    }
  }
}

BALLOT_AVX512 std::uint64_t fold_avx512(const RoundingStream& random, std::uint64_t groups) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i pair[2][4];
  for (std::uint64_t group = 0; group < groups; group += 2) {
    philox_pair(random, group, pair);
    for (int w = 0; w < 4; ++w) {
      acc[w] = _mm512_xor_si512(acc[w], pair[0][w]);
      if (group + 1 < groups) acc[w] = _mm512_xor_si512(acc[w], pair[1][w]);
    }
  }
  std::uint32_t folded[4];
  for (int w = 0; w < 4; ++w) {
    alignas(64) std::uint32_t lanes[16];
    _mm512_store_si512(lanes, acc[w]);
    folded[w] = 0;
    for (std::uint32_t lane : lanes) folded[w] ^= lane;
  }
  return fold_of(folded);
}

// ---- AVX2: 8 Philox blocks per half group ------------------------------------------------------

#define BALLOT_AVX2 __attribute__((target("avx2")))

BALLOT_AVX2 inline void mulhilo8(__m256i a, __m256i multiplier, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, multiplier);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), multiplier);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Blocks first_block + 16g + 8h + j, j = 0..7.
BALLOT_AVX2 inline void philox8(const RoundingStream& random, std::uint64_t group, int half, __m256i (&c)[4]) {
  const std::uint64_t base = random.first_block + 16 * group + 8 * static_cast<std::uint64_t>(half);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i low = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(base)));
  const __m256i high = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(base >> 32)));
  c[0] = _mm256_add_epi32(low, lane);
  // Unsigned c0 < low (the low word wrapped), by a signed compare with the sign bits flipped.
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(low, flip), _mm256_xor_si256(c[0], flip));
  c[1] = _mm256_sub_epi32(high, carry);  // carry lanes are -1
  c[2] = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(random.stream)));
  c[3] = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(random.stream >> 32)));
  const __m256i mul0 = _mm256_set1_epi64x(kMul0), mul1 = _mm256_set1_epi64x(kMul1);
  std::uint32_t key0 = static_cast<std::uint32_t>(random.seed), key1 = static_cast<std::uint32_t>(random.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(c[0], mul0, hi0, lo0);
    mulhilo8(c[2], mul1, hi1, lo1);
    const __m256i next0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1]), _mm256_set1_epi32(static_cast<int>(key0)));
    const __m256i next2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3]), _mm256_set1_epi32(static_cast<int>(key1)));
    c[0] = next0;
    c[1] = lo1;
    c[2] = next2;
    c[3] = lo0;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
}

BALLOT_AVX2 inline __m256 draws8(const __m256i (&c)[4], int m) {
  const __m256i word = c[m / 2];
  const __m256i k = (m % 2) ? _mm256_srli_epi32(word, 16) : _mm256_and_si256(word, _mm256_set1_epi32(0xFFFF));
  return _mm256_add_ps(_mm256_cvtepi32_ps(k), _mm256_set1_ps(0.5f));
}

// 8 coordinates from base; lanes outside the range read as 0 and their bits are masked off.
BALLOT_AVX2 inline __m256 load8(const float* x, std::size_t base, LaneRange lanes, unsigned& mask) {
  if (lanes.full(8)) {
    mask = 0xFF;
    return _mm256_loadu_ps(x + base);
  }
  mask = ((1u << lanes.last) - 1u) & ~((1u << lanes.first) - 1u);
  alignas(32) float buffer[8] = {};
  for (unsigned j = lanes.first; j < lanes.last; ++j) buffer[j] = x[base + j];
  return _mm256_load_ps(buffer);
}

BALLOT_AVX2 inline unsigned mask8(__m256 condition) { return static_cast<unsigned>(_mm256_movemask_ps(condition)); }

BALLOT_AVX2 void qsgd_avx2(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv,
                           float s, std::uint8_t* signs, std::uint8_t* planes, std::size_t plane_bytes,
                           int num_planes) {
  const __m256 vinv = _mm256_set1_ps(inv), vs = _mm256_set1_ps(s), zero = _mm256_setzero_ps();
  const __m256 scale = _mm256_set1_ps(kRoundingScale);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256i c[2][4];
  for (std::size_t group = lo / kRoundingGroup; group * kRoundingGroup < hi; ++group) {
    prefetch_ahead(x, group, hi);
    philox8(random, group, 0, c[0]);
    philox8(random, group, 1, c[1]);
    for (int m = 0; m < 8; ++m) {
      for (int half = 0; half < 2; ++half) {
        const std::size_t base =
            group * kRoundingGroup + 16 * static_cast<std::size_t>(m) + 8 * static_cast<std::size_t>(half);
        const LaneRange lanes = lanes_in(base, 8, lo, hi);
        if (lanes.first == lanes.last) continue;
        unsigned in;
        const __m256 v = load8(x, base, lanes, in);
        or_into<std::uint8_t>(signs, base, static_cast<std::uint8_t>(in & mask8(_mm256_cmp_ps(v, zero, _CMP_NLT_UQ))));
        __m256 r = _mm256_mul_ps(_mm256_and_ps(v, abs_mask), vinv);
        r = _mm256_min_ps(r, vs);  // r < s ? r : s, NaN -> s
        const __m256i whole = _mm256_cvttps_epi32(r);
        const __m256 fraction = _mm256_sub_ps(r, _mm256_cvtepi32_ps(whole));
        const __m256 up = _mm256_cmp_ps(draws8(c[half], m), _mm256_mul_ps(fraction, scale), _CMP_LT_OQ);
        const __m256i level = _mm256_sub_epi32(whole, _mm256_castps_si256(up));  // up lanes are -1
        for (int p = 0; p < num_planes; ++p) {
          const __m256 bit = _mm256_castsi256_ps(_mm256_slli_epi32(level, 31 - p));
          or_into<std::uint8_t>(planes + plane_bytes * static_cast<std::size_t>(p), base,
                                static_cast<std::uint8_t>(in & mask8(bit)));
        }
      }
    }
  }
}

BALLOT_AVX2 void terngrad_avx2(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi,
                               float limit, float inv, bool keep_all, std::uint8_t* signs, std::uint8_t* keep) {
  const __m256 vinv = _mm256_set1_ps(inv), vlimit = _mm256_set1_ps(limit), zero = _mm256_setzero_ps();
  const __m256 scale = _mm256_set1_ps(kRoundingScale);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256i c[2][4];
  for (std::size_t group = lo / kRoundingGroup; group * kRoundingGroup < hi; ++group) {
    prefetch_ahead(x, group, hi);
    if (!keep_all) {
      philox8(random, group, 0, c[0]);
      philox8(random, group, 1, c[1]);
    }
    for (int m = 0; m < 8; ++m) {
      for (int half = 0; half < 2; ++half) {
        const std::size_t base =
            group * kRoundingGroup + 16 * static_cast<std::size_t>(m) + 8 * static_cast<std::size_t>(half);
        const LaneRange lanes = lanes_in(base, 8, lo, hi);
        if (lanes.first == lanes.last) continue;
        unsigned in;
        const __m256 v = load8(x, base, lanes, in);
        or_into<std::uint8_t>(signs, base, static_cast<std::uint8_t>(in & mask8(_mm256_cmp_ps(v, zero, _CMP_NLT_UQ))));
        if (keep_all) {
          or_into<std::uint8_t>(keep, base, static_cast<std::uint8_t>(in));
          continue;
        }
        const __m256 a = _mm256_and_ps(v, abs_mask);
        const __m256 clipped = _mm256_blendv_ps(vlimit, a, _mm256_cmp_ps(a, vlimit, _CMP_LT_OQ));
        const __m256 threshold = _mm256_mul_ps(_mm256_mul_ps(clipped, vinv), scale);
        or_into<std::uint8_t>(
            keep, base,
            static_cast<std::uint8_t>(in & mask8(_mm256_cmp_ps(draws8(c[half], m), threshold, _CMP_LT_OQ))));
      }
    }
  }
}

BALLOT_AVX2 std::uint64_t fold_avx2(const RoundingStream& random, std::uint64_t groups) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i c[4];
  for (std::uint64_t group = 0; group < groups; ++group) {
    for (int half = 0; half < 2; ++half) {
      philox8(random, group, half, c);
      for (int w = 0; w < 4; ++w) acc[w] = _mm256_xor_si256(acc[w], c[w]);
    }
  }
  std::uint32_t folded[4];
  for (int w = 0; w < 4; ++w) {
    alignas(32) std::uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[w]);
    folded[w] = 0;
    for (std::uint32_t lane : lanes) folded[w] ^= lane;
  }
  return fold_of(folded);
}

#pragma GCC diagnostic pop
#endif  // __x86_64__

}  // namespace

RoundingStream::RoundingStream(Rng& rng, std::uint64_t d)
    : seed(rng.seed()), stream(rng.stream()), first_block((rng.position() + 3) / 4) {
  rng.seek(4 * (first_block + blocks_for(d)));
}

std::uint16_t RoundingStream::bits(std::uint64_t i) const {
  const std::uint64_t group = i / kRoundingGroup, within = i % kRoundingGroup;
  const std::uint64_t m = within / 16, j = within % 16;
  const std::uint32_t word = philox_stream_word(seed, stream, 4 * (first_block + 16 * group + j) + m / 2);
  return static_cast<std::uint16_t>(word >> (16 * (m % 2)));
}

void qsgd_quantize(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv, float s,
                   std::uint8_t* signs, std::uint8_t* planes, std::size_t plane_bytes, int num_planes) {
  BALLOT_ENFORCE(num_planes >= 0 && num_planes <= 16, "QSGD has at most 16 level planes");
  if (lo >= hi) return;
#if defined(__x86_64__)
  switch (kernels::active_isa()) {
    case kernels::Isa::kAvx512:
      return qsgd_avx512_for(num_planes, std::make_integer_sequence<int, 17>())(random, x, lo, hi, inv, s, signs,
                                                                                planes, plane_bytes);
    case kernels::Isa::kAvx2:
      return qsgd_avx2(random, x, lo, hi, inv, s, signs, planes, plane_bytes, num_planes);
    case kernels::Isa::kScalar:
      break;
  }
#endif
  qsgd_scalar(random, x, lo, hi, inv, s, signs, planes, plane_bytes, num_planes);
}

void qsgd_levels(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv, float s,
                 std::uint32_t* level) {
  for_each_coordinate(random, lo, hi,
                      [&](std::size_t i, std::uint32_t k) { level[i - lo] = qsgd_level(x[i], k, inv, s); });
}

void terngrad_quantize(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float limit,
                       float inv, bool keep_all, std::uint8_t* signs, std::uint8_t* keep) {
  if (lo >= hi) return;
#if defined(__x86_64__)
  switch (kernels::active_isa()) {
    case kernels::Isa::kAvx512:
      return terngrad_avx512(random, x, lo, hi, limit, inv, keep_all, signs, keep);
    case kernels::Isa::kAvx2:
      return terngrad_avx2(random, x, lo, hi, limit, inv, keep_all, signs, keep);
    case kernels::Isa::kScalar:
      break;
  }
#endif
  terngrad_scalar(random, x, lo, hi, limit, inv, keep_all, signs, keep);
}

std::uint64_t fold_rounding_blocks(const RoundingStream& random, std::uint64_t d) {
  const std::uint64_t groups = (d + kRoundingGroup - 1) / kRoundingGroup;
#if defined(__x86_64__)
  switch (kernels::active_isa()) {
    case kernels::Isa::kAvx512:
      return fold_avx512(random, groups);
    case kernels::Isa::kAvx2:
      return fold_avx2(random, groups);
    case kernels::Isa::kScalar:
      break;
  }
#endif
  return fold_scalar(random, groups);
}

}  // namespace ballot::coding::detail
