// AVX2 kernels. Compiled with -mavx2 only in this unit (see detail/cpu_kernels.h); partial words
// at the ends go to the scalar kernels.
#include <immintrin.h>

#include "kernels/detail/bitsliced_vote.h"
#include "kernels/detail/cpu_kernels.h"
#include "kernels/detail/update_loops.h"

namespace ballot::kernels::detail {
namespace {

using Word4 = std::uint64_t __attribute__((vector_size(32)));

void pack_avx2(const float* values, std::size_t count, std::uint64_t* words) {
  const std::size_t full = count / 64;
  const __m256 zero = _mm256_setzero_ps();
  for (std::size_t w = 0; w < full; ++w) {
    const float* p = values + 64 * w;
    std::uint64_t word = 0;
    for (int j = 0; j < 8; ++j) {
      // "Not less than, unordered": true for x >= 0, -0.0 and NaN, as sign_bit().
      const __m256 ge = _mm256_cmp_ps(_mm256_loadu_ps(p + 8 * j), zero, _CMP_NLT_UQ);
      word |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm256_movemask_ps(ge))) << (8 * j);
    }
    words[w] = word;
  }
  if (count % 64 != 0) kScalarKernels.pack(values + 64 * full, count % 64, words + full);
}

void unpack_avx2(const std::uint64_t* words, std::size_t first_bit, std::size_t count, float negative, float positive,
                 float* out) {
  // Scalar up to a byte boundary, then 8 coordinates per byte.
  const std::size_t to_boundary = (8 - first_bit % 8) % 8;
  const std::size_t head = count < to_boundary ? count : to_boundary;
  kScalarKernels.unpack(words, first_bit, head, negative, positive, out);
  std::size_t done = head;
  const auto* bytes = reinterpret_cast<const unsigned char*>(words);
  const __m256i lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 neg = _mm256_set1_ps(negative), pos = _mm256_set1_ps(positive);
  for (; done + 8 <= count; done += 8) {
    const __m256i byte = _mm256_set1_epi32(bytes[(first_bit + done) / 8]);
    const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bits), lane_bits);
    _mm256_storeu_ps(out + done, _mm256_blendv_ps(neg, pos, _mm256_castsi256_ps(set)));
  }
  kScalarKernels.unpack(words, first_bit + done, count - done, negative, positive, out + done);
}

void vote_avx2(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
               std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, int planes, std::uint64_t* out) {
  const std::size_t vector_end = word_begin + (word_end - word_begin) / 4 * 4;
  bitsliced_vote<Word4>(inputs, weights, num_inputs, word_begin, vector_end, threshold, planes, out);
  kScalarKernels.vote(inputs, weights, num_inputs, vector_end, word_end, threshold, planes, out);
}

std::size_t agree_avx2(const std::uint64_t* a, const std::uint64_t* b, std::size_t bits) {
  const std::size_t full = bits / 64;
  std::size_t equal = 0;
  for (std::size_t w = 0; w < full; ++w) {
    equal += static_cast<std::size_t>(_mm_popcnt_u64(~(a[w] ^ b[w])));
  }
  return equal + kScalarKernels.agree(a + full, b + full, bits % 64);
}

// The entry scans: the scalar unit's.
const CpuKernels kAvx2{Isa::kAvx2,
                       &pack_avx2,
                       &unpack_avx2,
                       &vote_avx2,
                       &agree_avx2,
                       kScalarKernels.entries,
                       kScalarKernels.count_entries,
                       &simd_momentum<8>,
                       &simd_update<8>};

}  // namespace

const CpuKernels* const kAvx2Kernels = &kAvx2;

}  // namespace ballot::kernels::detail
