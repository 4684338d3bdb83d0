// The text report of an election code, for the `ballot code …` command: the
// matrix, its redundancy r and structure, its exact tolerance in both threat models (tolerance.h)
// with a breaking coalition, the structural guarantee, and a Monte Carlo error table against plain
// majority vote. Also the minimum-redundancy search report (code_search.h).
//
// Cost: dominated by the Monte Carlo table (|b values| × 2 × trials) and, for n near 30, the
// exhaustive certificate. Deterministic for the options' seed. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coding/allocation_matrix.h"
#include "coding/election_monte_carlo.h"
#include "core/result.h"

namespace ballot::coding {

struct CodeReportOptions {
  // Rows of the Monte Carlo table; empty: 0 .. ⌊(n−1)/2⌋.
  std::vector<std::size_t> byzantine_counts;
  double q = 0.9;
  ElectionAttack attack = ElectionAttack::kReverse;
  TieRule ties = TieRule::kPlusOne;
  std::uint64_t trials = std::uint64_t{1} << 16;  // per table cell
  std::uint64_t seed = 1;
  bool show_matrix = true;  // the matrix itself (skipped anyway for n > 64)
};

// Report of a given matrix. Errors: those of the Monte Carlo options (e.g. q out of range).
Result<std::string> code_report(const AllocationMatrix& g, const CodeReportOptions& options = {});

// Report of a code named by a Spec string ("paper5", "deterministic:b=2", "bernoulli:r=2",
// "identity", "file:path=G.txt"; see make_allocation_matrix) for n nodes; the Bernoulli draw uses
// options.seed. Errors: spec parsing and construction errors.
Result<std::string> code_report(std::string_view spec, std::size_t n, const CodeReportOptions& options = {});

// The minimum-redundancy search for (n, b), n ≤ 9: the optimal matrix, its r beside the general
// construction's, whether optimality is proven, the search effort and time.
Result<std::string> code_search_report(std::size_t n, std::size_t b);

}  // namespace ballot::coding
