// CAF, the Covariance-bound Agnostic Filter (Allouah, Guerraoui, Stephan — ICML 2025, "Towards
// Trustworthy Federated Learning with Untrusted Participants", Algorithm 2).
//
// A spectral filter on soft weights c_i, starting at 1. While Σ c_i > n − 2f:
//   μ_c = Σ c_i x_i / Σ c_i,   Σ_c = Σ c_i (x_i − μ_c)(x_i − μ_c)ᵀ / Σ c_i,
//   (λ, v) = the largest eigenvalue of Σ_c and a unit eigenvector,
//   τ_i = ((x_i − μ_c)·v)²,   c_i ← c_i (1 − τ_i / τ_max),  τ_max = max τ_i over the inputs with c_i > 0.
// The output is the μ_c of smallest λ among the iterates (the first on ties); with f = 0 the loop
// never runs and the output is the mean. Unlike filters for bounded covariance it needs no bound on
// the honest covariance. Precondition n ≥ 2f + 1.
//
// Each step zeroes the weight of at least one input, so there are at most 2f steps. The eigenproblem
// is solved exactly (Eigen) on the n×n Gram form of the weighted covariance (robust/detail/
// covariance.h), so the cost is one Gram product O(n²·d) + O(f·n³) + one read, and no d-vector is
// formed before the output. Non-finite inputs (and inputs whose squared norm overflows) start with
// weight 0 and count against f: k of them leave n − k inputs and f − min(k, f). Deterministic for
// any thread count. Differences from ByzFL's CAF are listed in docs/robust.md.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct CafOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class Caf final : public Aggregator {
 public:
  using Options = CafOptions;
  Caf() = default;
  explicit Caf(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  // report.scores: the weights c_i of the returned iterate (0 for excluded inputs);
  // report.selected: the inputs with c_i > 0; report.iterations: filter steps run.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
