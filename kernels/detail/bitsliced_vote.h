// Internal: the bit-sliced vote loop, generic over the word type (uint64_t, or a GCC vector of
// 4 or 8 uint64_t for AVX2 / AVX-512) and the number of counter planes. Included by each ISA's
// translation unit; instantiated there with that unit's own vector type only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/sign_logic.h"

namespace ballot::kernels::detail {
// Internal linkage: each ISA unit that includes this gets its own copies, so the linker can never
// hand one unit's wide-instruction code to another's callers (detail/cpu_kernels.h).
namespace {

// a + b + c per bit: sum (weight 1) and carry (weight 2). Two ternary-logic instructions where
// the compiler has them (AVX-512), five otherwise.
template <typename Word>
inline void full_add(Word a, Word b, Word c, Word& sum, Word& carry) {
  const Word ab = a ^ b;
  sum = ab ^ c;
  carry = (a & b) | (c & ab);
}

template <typename Word>
inline Word load_word(const std::uint64_t* p) {
  Word x;
  std::memcpy(&x, p, sizeof(Word));
  return x;
}

// Words [word_begin, word_end) of the output, `Lanes` 64-bit words (one Word) at a time; the
// range length must be a multiple of Lanes. The planes live in registers: P is a compile-time
// constant so the ripple-carry loops unroll.
//
// Unweighted, seven inputs at a time go through a carry-save tree first (four full adders give
// their count as three bits), which is then added to the counter: about 2.3 word operations per
// input with ternary logic instead of 2P for a ripple-carry add of each input (measured on a
// Zen 4 VM at n = 15, d = 2^26: 10.2 ms before, 4.4–5.1 ms after, bench/README.md). The counts,
// and so the votes, are the same.
template <typename Word, int P, bool Weighted>
void bitsliced_vote_range(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
                          std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, std::uint64_t* out) {
  constexpr std::size_t kLanes = sizeof(Word) / sizeof(std::uint64_t);
  // With many inputs the hardware prefetchers lose track of the streams (one per input); ask for
  // each input's data a few cache lines ahead.
  constexpr std::size_t kPrefetchWords = 64;
  for (std::size_t w = word_begin; w < word_end; w += kLanes) {
    Word planes[P] = {};
    if (w + kPrefetchWords < word_end) {
      for (std::size_t i = 0; i < num_inputs; ++i) __builtin_prefetch(inputs[i] + w + kPrefetchWords);
    }
    std::size_t i = 0;
    if constexpr (!Weighted && P >= 3) {
      for (; i + 7 <= num_inputs; i += 7) {
        const std::uint64_t* const* in = inputs + i;
        Word s1, c1, s2, c2, ones, c3, twos, fours;
        full_add(load_word<Word>(in[0] + w), load_word<Word>(in[1] + w), load_word<Word>(in[2] + w), s1, c1);
        full_add(load_word<Word>(in[3] + w), load_word<Word>(in[4] + w), load_word<Word>(in[5] + w), s2, c2);
        full_add(s1, s2, load_word<Word>(in[6] + w), ones, c3);
        full_add(c1, c2, c3, twos, fours);
        // planes += ones + 2·twos + 4·fours (the total never exceeds 2^P − 1: no carry is lost).
        Word carry = planes[0] & ones;
        planes[0] ^= ones;
        full_add(planes[1], twos, carry, planes[1], carry);
        full_add(planes[2], fours, carry, planes[2], carry);
        bitsliced_add(planes, P, 3, carry);
      }
    }
    for (; i < num_inputs; ++i) {
      const Word x = load_word<Word>(inputs[i] + w);
      if constexpr (Weighted) {
        // Adds x once for every set bit b of the weight, at plane b (x · 2^b).
        for (std::uint32_t weight = weights[i]; weight != 0; weight &= weight - 1) {
          bitsliced_add(planes, P, __builtin_ctz(weight), x);
        }
      } else {
        bitsliced_add(planes, P, 0, x);
      }
    }
    const Word result = bitsliced_greater_equal(planes, P, threshold);
    std::memcpy(out + w, &result, sizeof(Word));
  }
}

using VoteRangeFn = void (*)(const std::uint64_t* const*, const std::uint32_t*, std::size_t, std::size_t, std::size_t,
                             std::uint64_t, std::uint64_t*);

// Function tables indexed by planes - 1, for planes 1..32. (A plain array, not std::array: no
// library inline function may be instantiated in the ISA units, see detail/cpu_kernels.h.)
template <typename Word, bool Weighted, typename Indices>
struct VoteTable;
template <typename Word, bool Weighted, std::size_t... Index>
struct VoteTable<Word, Weighted, std::index_sequence<Index...>> {
  static constexpr VoteRangeFn kFunctions[] = {&bitsliced_vote_range<Word, static_cast<int>(Index) + 1, Weighted>...};
};

template <typename Word>
void bitsliced_vote(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
                    std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, int planes,
                    std::uint64_t* out) {
  using Planes = std::make_index_sequence<32>;
  const VoteRangeFn* table =
      weights ? VoteTable<Word, true, Planes>::kFunctions : VoteTable<Word, false, Planes>::kFunctions;
  table[planes - 1](inputs, weights, num_inputs, word_begin, word_end, threshold, out);
}

}  // namespace
}  // namespace ballot::kernels::detail
