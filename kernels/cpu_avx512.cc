// AVX-512 kernels (F + BW + VL). Compiled with AVX-512 flags only in this unit (see
// detail/cpu_kernels.h); partial words at the ends go to the scalar kernels.
#include <immintrin.h>

#include "kernels/detail/bitsliced_vote.h"
#include "kernels/detail/cpu_kernels.h"
#include "kernels/detail/update_loops.h"

namespace ballot::kernels::detail {
namespace {

using Word8 = std::uint64_t __attribute__((vector_size(64)));

void pack_avx512(const float* values, std::size_t count, std::uint64_t* words) {
  const std::size_t full = count / 64;
  const __m512 zero = _mm512_setzero_ps();
  // Two words (512 bytes) per iteration: eight independent loads in flight per step.
  const auto pack_word = [&](const float* p) {
    // "Not less than, unordered": true for x >= 0, -0.0 and NaN, as sign_bit(). The four 16-bit
    // masks are joined in mask registers (kunpck), so one move leaves the mask unit per word.
    const __mmask16 m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p), zero, _CMP_NLT_UQ);
    const __mmask16 m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + 16), zero, _CMP_NLT_UQ);
    const __mmask16 m2 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + 32), zero, _CMP_NLT_UQ);
    const __mmask16 m3 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + 48), zero, _CMP_NLT_UQ);
    const __mmask32 low = _mm512_kunpackw(m1, m0), high = _mm512_kunpackw(m3, m2);
    return _cvtmask64_u64(_mm512_kunpackd(high, low));
  };
  std::size_t w = 0;
  for (; w + 2 <= full; w += 2) {
    // Ask for the data 4 KiB ahead: the L2 streamer alone leaves the pack a few percent below
    // the read probe on large inputs.
    __builtin_prefetch(values + 64 * w + 1024);
    __builtin_prefetch(values + 64 * w + 1024 + 64);
    const std::uint64_t first = pack_word(values + 64 * w);
    const std::uint64_t second = pack_word(values + 64 * w + 64);
    words[w] = first;
    words[w + 1] = second;
  }
  if (w < full) words[w] = pack_word(values + 64 * w);
  if (count % 64 != 0) kScalarKernels.pack(values + 64 * full, count % 64, words + full);
}

void unpack_avx512(const std::uint64_t* words, std::size_t first_bit, std::size_t count, float negative, float positive,
                   float* out) {
  // Scalar up to a 16-bit boundary, then 16 coordinates per mask.
  const std::size_t to_boundary = (16 - first_bit % 16) % 16;
  const std::size_t head = count < to_boundary ? count : to_boundary;
  kScalarKernels.unpack(words, first_bit, head, negative, positive, out);
  std::size_t done = head;
  const auto* bytes = reinterpret_cast<const unsigned char*>(words);
  const __m512 neg = _mm512_set1_ps(negative), pos = _mm512_set1_ps(positive);
  for (; done + 16 <= count; done += 16) {
    std::uint16_t mask;  // little-endian: the 16 bits starting at a multiple of 16
    std::memcpy(&mask, bytes + (first_bit + done) / 8, sizeof(mask));
    _mm512_storeu_ps(out + done, _mm512_mask_blend_ps(mask, neg, pos));
  }
  kScalarKernels.unpack(words, first_bit + done, count - done, negative, positive, out + done);
}

void vote_avx512(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
                 std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, int planes,
                 std::uint64_t* out) {
  const std::size_t vector_end = word_begin + (word_end - word_begin) / 8 * 8;
  bitsliced_vote<Word8>(inputs, weights, num_inputs, word_begin, vector_end, threshold, planes, out);
  kScalarKernels.vote(inputs, weights, num_inputs, vector_end, word_end, threshold, planes, out);
}

std::size_t agree_avx512(const std::uint64_t* a, const std::uint64_t* b, std::size_t bits) {
  const std::size_t full = bits / 64;
  std::size_t equal = 0;
  for (std::size_t w = 0; w < full; ++w) {
    equal += static_cast<std::size_t>(_mm_popcnt_u64(~(a[w] ^ b[w])));
  }
  return equal + kScalarKernels.agree(a + full, b + full, bits % 64);
}

// 16 floats tested a step (vptestmd) and the entries' indices packed in order (vpcompressd) into a
// register, then stored whole (dst has room: count ≤ i − begin). The compressing store to memory is
// microcoded on AMD Zen 4 (kernels_bench, 1 % dense, d = 11.2 M, Zen 4: 12.9 ms with it, 1.4 ms
// this way).
std::size_t entries_avx512(const float* x, std::size_t begin, std::size_t end, std::uint32_t* dst) {
  const __m512i step = _mm512_set1_epi32(16);
  __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(begin)),
                                   _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  std::size_t count = 0, i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512i v = _mm512_loadu_si512(x + i);
    const __mmask16 entry = _mm512_test_epi32_mask(v, v);
    _mm512_storeu_si512(dst + count, _mm512_maskz_compress_epi32(entry, index));
    count += static_cast<std::size_t>(_mm_popcnt_u32(entry));
    index = _mm512_add_epi32(index, step);
  }
  return count + kScalarKernels.entries(x, i, end, dst + count);
}

std::size_t count_entries_avx512(const float* x, std::size_t n) {
  std::size_t count = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_loadu_si512(x + i);
    count += static_cast<std::size_t>(_mm_popcnt_u32(_mm512_test_epi32_mask(v, v)));
  }
  return count + kScalarKernels.count_entries(x + i, n - i);
}

const CpuKernels kAvx512{Isa::kAvx512,    &pack_avx512,          &unpack_avx512,     &vote_avx512,    &agree_avx512,
                         &entries_avx512, &count_entries_avx512, &simd_momentum<16>, &simd_update<16>};

}  // namespace

const CpuKernels* const kAvx512Kernels = &kAvx512;

}  // namespace ballot::kernels::detail
