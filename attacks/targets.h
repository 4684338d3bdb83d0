// Who attacks: a count drawn with a seed (the election-coding paper's model), explicit node
// indices, or the coalition that is worst for the allocation matrix G in use.
//
// Every function is deterministic (the same arguments give the same set in every process) and
// returns ascending node indices. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "coding/allocation_matrix.h"
#include "core/result.h"

namespace ballot::attacks {

// `count` distinct node indices of [0, n), uniformly at random from (seed, purpose stream),
// ascending. count > n is kInvalidArgument. O(n).
Result<std::vector<std::size_t>> choose_byzantine(std::size_t n, std::size_t count, std::uint64_t seed);

// "0,3,5" (spaces allowed around entries) → {0, 3, 5} ascending. Errors (kInvalidArgument) name
// the entry: not a decimal number, ≥ n, or a duplicate. An empty or blank list is the empty set.
Result<std::vector<std::size_t>> parse_indices(std::string_view list, std::size_t n);

// The coalition of `count` nodes that is worst for G under threat model (a) (tolerance.h):
// the one plan_omniscient_attack picks over a fixed adversarial pattern set, i.e. the
// coalition that, voting −μ, makes the final vote wrong on the largest number of partition-sign
// patterns u ∈ {±1}^n.
//   n ≤ 16: the pattern set is all 2^n patterns (so the score is the probability of a wrong final
//           vote when partition signs are uniform and independent, times 2^n);
//   17 ≤ n ≤ 64: 4096 patterns drawn from a fixed stream (seed 0, purpose "worstset");
// and plan_omniscient_attack searches coalitions exhaustively when C(n, count) ≤ 20000 (then the
// set is optimal for that score; ties go to the lexicographically first mask, i.e. the smallest
// indices), greedily with 1-swap local search beyond.
//   n > 64: (plan_omniscient_attack needs n ≤ 64) the `count` nodes whose honest vote equals μ on
//           the most sampled patterns (ties to the smaller index): removing a reliable voter
//           costs the decoder the most.
// When every coalition of `count` nodes is harmless (count within G's tolerance) the score is 0
// for all and the result is {0, …, count−1}. count > n is clamped to n. Cost: O(C(n,count) ·
// #distinct vote groups) when exhaustive (≤ 2^n groups), greedy O(n·count·4096) plus the 1-swap
// rounds beyond. Measured (RelWithDebInfo, one loaded core): n = 15, count = 6: 0.8 s;
// n = 16, count = 8: 1.5 s; n = 25, count = 8 (greedy): 0.16 s; n = 63, count = 20: 1.3 s.
std::vector<std::size_t> worst_coalition(const coding::AllocationMatrix& g, std::size_t count);

// The CLI form of "who attacks" (for `--byzantine-nodes` and the evaluation grid):
//   "random"  choose_byzantine(n, count, seed)
//   "worst"   worst_coalition(*g, count); g null means G = I, where every coalition is as bad
//             as any other: {0, …, count−1}
//   "0,3,5"   parse_indices(selector, n); when count ≠ 0 it must equal the number of indices
// Errors name the problem (kInvalidArgument).
Result<std::vector<std::size_t>> select_byzantine(std::string_view selector, std::size_t n, std::size_t count,
                                                  std::uint64_t seed, const coding::AllocationMatrix* g);

}  // namespace ballot::attacks
