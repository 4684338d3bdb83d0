// Geometric median by smoothed Weiszfeld iterations (RFA: Pillutla, Kakade, Harchaoui,
// IEEE TSP 2022, Algorithm 3).
//
// argmin_v Σ_i ‖v − x_i‖, approximated by v ← Σ β_i x_i / Σ β_i with β_i = 1 / max(ν, ‖v − x_i‖),
// starting from the mean (or from 0, start=zero: ByzFL's GeometricMedian), until the objective
// improves by less than `tolerance` (relative) or after `max_iterations`; a negative tolerance
// never stops early (exactly max_iterations steps, as ByzFL's T). Breakdown point 1/2:
// precondition n ≥ 2f + 1 (f is only checked).
//
// Every iterate is a combination Σ α_i x_i of the inputs, so the iterations run on the n×n Gram
// matrix (‖v − x_i‖² = αᵀGα − 2(Gα)_i + G_ii) and the d-dimensional vector is formed once at the
// end: cost one Gram product O(n²·d) + O(iterations·n²) + one read, instead of two reads per
// iteration. Non-finite inputs get weight 0 and are reported. Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

enum class WeiszfeldStart { kMean, kZero };

struct GeometricMedianOptions {
  std::size_t f = 0;
  std::size_t max_iterations = 100;
  double nu = 1e-6;         // smoothing ν > 0: distances below ν count as ν
  double tolerance = 1e-8;  // stop when (previous − objective) ≤ tolerance · objective; < 0: never
  std::size_t threads = 1;
  WeiszfeldStart start = WeiszfeldStart::kMean;  // kZero: v₀ = 0
};

class GeometricMedian final : public Aggregator {
 public:
  using Options = GeometricMedianOptions;
  GeometricMedian() = default;
  explicit GeometricMedian(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override;  // also validates ν > 0 and a finite tolerance
  // report.iterations: Weiszfeld steps taken; report.scores: the final weight of each input.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
