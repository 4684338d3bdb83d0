// SMEA, Smallest Maximum Eigenvalue Averaging (Allouah, Guerraoui, Gupta, Pinot, Stephan — ICML
// 2023, "On the Privacy-Robustness-Utility Trilemma in Distributed Learning", the SMEA rule).
//
// Among all subsets S of n − f inputs, take one whose empirical covariance
// Σ_S = (1/|S|) Σ_{i∈S} (x_i − x̄_S)(x_i − x̄_S)ᵀ has the smallest largest eigenvalue, and output its
// mean x̄_S. Precondition n ≥ 2f + 1.
//
// Exact: one Gram product, then for each of the C(n, f) subsets the largest eigenvalue of its
// (n − f)×(n − f) centred Gram matrix (Eigen's symmetric eigensolver; it has the nonzero eigenvalues
// of the d×d covariance). Cost O(n²·d) + O(C(n, f)·(n − f)³) + one read; exponential in f, so
// aggregate() refuses with kLimitExceeded when C(n', f') > max_subsets. Non-finite inputs are
// excluded and count against f (k of them leave n − k inputs and f − min(k, f)). Ties: the
// lexicographically first subset. threads=N splits the subsets (and the Gram product) across N
// threads; deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct SmeaOptions {
  std::size_t f = 0;
  double max_subsets = 1e6;  // refuse above this many candidate subsets
  std::size_t threads = 1;
};

class Smea final : public Aggregator {
 public:
  using Options = SmeaOptions;
  Smea() = default;
  explicit Smea(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override;  // also max_subsets ≥ 1
  // report.selected: the chosen subset; report.scores: {λ_max of its covariance}.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
