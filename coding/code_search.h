// Minimum-redundancy b-tolerant election codes for small n.
//
// Finds the allocation matrix with the fewest ones that tolerates b Byzantine nodes under threat
// model (a) (tolerance.h: A(u) ≥ (n + 2b + 1)/2 for all 2^n sign patterns), and proves it minimal
// by exhausting the search space. Known answers (ALGORITHMS.md §3): (n=5, b=1) → 19 ones, the
// paper's code; (n=7, b=1) → 29, where the general construction needs 33.
//
// Method: branch and bound over rows as a multiset. Every subset S of partitions has a
// precomputed correctness set C_S = {u : maj_S(u) = μ(u)} (2^n bits); a code is a choice of n
// subsets whose indicator sum reaches the threshold on every pattern. Symmetry: rows are chosen in
// non-decreasing size, and a new row only distinguishes columns that earlier rows separate
// (columns with equal membership so far form a cell, and only how many columns of each cell the
// row takes matters). Pruning: a pattern whose deficit exceeds the rows left is infeasible; a
// pattern whose deficit equals them forces every remaining row to be correct on it; the cost
// bound cost + rows_left · size rejects a size as soon as it cannot beat the incumbent (the
// general construction, or n full rows). Exponential in n: n ≤ 7 takes milliseconds, n = 9 is
// the limit (bench/coding/ELECTION_RESULTS.md has the times). Deterministic; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/allocation_matrix.h"
#include "core/result.h"

namespace ballot::coding {

inline constexpr std::size_t kMaxSearchNodes = 9;

struct CodeSearchOptions {
  // Stop after visiting this many search nodes (0: no limit); the result then says
  // proven_optimal = false and holds the best code found so far.
  std::uint64_t max_visits = 0;
};

struct CodeSearchResult {
  AllocationMatrix matrix;  // rows sorted by size, smallest first
  std::size_t ones = 0;
  bool proven_optimal = false;
  std::uint64_t visits = 0;           // search nodes visited
  std::size_t construction_ones = 0;  // the general construction's ones (0 for even n)
};

// Errors (kInvalidArgument): n = 0 or n > kMaxSearchNodes, 2b + 1 > n.
Result<CodeSearchResult> find_minimum_redundancy_code(std::size_t n, std::size_t b,
                                                      const CodeSearchOptions& options = {});

}  // namespace ballot::coding
