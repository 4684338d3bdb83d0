#include "coding/detail/uniform.h"

#include "core/philox.h"
#include "kernels/isa.h"

#if defined(__x86_64__)
// GCC 12 reports a false -Wmaybe-uninitialized inside the AVX-512 intrinsics' own headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace ballot::coding::detail {
namespace {

void fill_scalar(std::uint64_t seed, std::uint64_t stream, std::uint64_t start, float* out,
                 std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = philox_unit_float(philox_stream_word(seed, stream, start + i));
  }
}

#if defined(__x86_64__)
// 16 Philox4x32-10 blocks per iteration in structure-of-arrays form. _mm512_mul_epu32 multiplies
// the even 32-bit lanes into 64-bit products; the odd lanes go through a shift, and the high and
// low halves are put back together with blends. The four output words of each block are then
// transposed into stream order (block b -> words 4b..4b+3).
__attribute__((target("avx512f"))) inline void mulhilo16(__m512i a, __m512i multiplier,
                                                         __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, multiplier);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), multiplier);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

__attribute__((target("avx512f"))) void fill_blocks_avx512(std::uint64_t seed,
                                                           std::uint64_t stream,
                                                           std::uint64_t first_block, float* out,
                                                           std::size_t num_blocks) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53u);
  const __m512i mul1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512 to_unit = _mm512_set1_ps(1.0f / 16777216.0f);
  std::size_t b = 0;
  for (; b + 16 <= num_blocks; b += 16) {
    const std::uint64_t block = first_block + b;
    if (static_cast<std::uint32_t>(block) > 0xFFFFFFF0u) break;  // low word would carry: scalar
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(block))), lane);
    __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(block >> 32)));
    __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream)));
    __m512i c3 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream >> 32)));
    std::uint32_t key0 = static_cast<std::uint32_t>(seed), key1 = static_cast<std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo16(c0, mul0, hi0, lo0);
      mulhilo16(c2, mul1, hi1, lo1);
      const __m512i k0 = _mm512_set1_epi32(static_cast<int>(key0));
      const __m512i k1 = _mm512_set1_epi32(static_cast<int>(key1));
      c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), k0);
      c1 = lo1;
      c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), k1);
      c3 = lo0;
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u2, u3, 0x44), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    const __m512i words[4] = {_mm512_shuffle_i32x4(v0, v2, 0x88), _mm512_shuffle_i32x4(v0, v2, 0xDD),
                              _mm512_shuffle_i32x4(v1, v3, 0x88), _mm512_shuffle_i32x4(v1, v3, 0xDD)};
    for (int m = 0; m < 4; ++m) {
      const __m512 unit = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(words[m], 8)), to_unit);
      _mm512_storeu_ps(out + 4 * b + 16 * m, unit);
    }
  }
  if (b < num_blocks) fill_scalar(seed, stream, 4 * (first_block + b), out + 4 * b, 4 * (num_blocks - b));
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void fill_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t start,
                  std::span<float> out) {
  float* dst = out.data();
  std::size_t count = out.size();
#if defined(__x86_64__)
  if (kernels::active_isa() == kernels::Isa::kAvx512 && count >= 128) {
    // Scalar up to a block boundary, whole blocks vectorised, scalar tail.
    const std::size_t head = static_cast<std::size_t>((4 - start % 4) % 4);
    fill_scalar(seed, stream, start, dst, head);
    const std::size_t blocks = (count - head) / 4;
    fill_blocks_avx512(seed, stream, (start + head) / 4, dst + head, blocks);
    const std::size_t done = head + 4 * blocks;
    fill_scalar(seed, stream, start + done, dst + done, count - done);
    return;
  }
#endif
  fill_scalar(seed, stream, start, dst, count);
}

}  // namespace ballot::coding::detail
