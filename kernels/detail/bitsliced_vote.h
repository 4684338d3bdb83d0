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

// Words [word_begin, word_end) of the output, `Lanes` 64-bit words (one Word) at a time; the
// range length must be a multiple of Lanes. The planes live in registers: P is a compile-time
// constant so the ripple-carry loops unroll.
template <typename Word, int P, bool Weighted>
void bitsliced_vote_range(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
                          std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, std::uint64_t* out) {
  constexpr std::size_t kLanes = sizeof(Word) / sizeof(std::uint64_t);
  // With many inputs the hardware prefetchers lose track of the streams (one per input); ask for
  // each input's data a few cache lines ahead.
  constexpr std::size_t kPrefetchWords = 64;
  for (std::size_t w = word_begin; w < word_end; w += kLanes) {
    Word planes[P] = {};
    for (std::size_t i = 0; i < num_inputs; ++i) {
      if (w + kPrefetchWords < word_end) __builtin_prefetch(inputs[i] + w + kPrefetchWords);
      Word x;
      std::memcpy(&x, inputs[i] + w, sizeof(Word));
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

}  // namespace ballot::kernels::detail
