// Minimum-diameter averaging (El Mhamdi, Guerraoui, Rouault — ICML 2018; the MDA of
// Rousseeuw's minimum-volume family): among all subsets of n − f inputs, take one of smallest
// diameter max_{i,j∈S} ‖x_i − x_j‖ and output its mean. Precondition n ≥ 2f + 1.
//
// Exact: distances from one Gram product, then a branch-and-bound enumeration of the C(n, f)
// subsets (pruned as soon as a partial subset is no better than the best found). Exponential in f,
// so aggregate() refuses with kLimitExceeded when C(n', f') > max_subsets instead of running for
// hours. Non-finite inputs are excluded and count against f. Ties: the lexicographically first
// subset. Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct MinimumDiameterAveragingOptions {
  std::size_t f = 0;
  double max_subsets = 1e6;  // refuse above this many candidate subsets
  std::size_t threads = 1;
};

class MinimumDiameterAveraging final : public Aggregator {
 public:
  using Options = MinimumDiameterAveragingOptions;
  MinimumDiameterAveraging() = default;
  explicit MinimumDiameterAveraging(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override;
  // report.selected: the chosen subset; report.scores: {its squared diameter}.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
