// Centered clipping (Karimireddy, He, Jaggi — ICML 2021, "Learning from History for
// Byzantine Robust Optimization", eq. (3)).
//
// v ← v + (1/n) Σ_i clip_τ(x_i − v),  clip_τ(z) = z · min(1, τ / ‖z‖),  repeated `iterations` times
// from a start v₀: zero, the coordinate-wise median, or a given vector (in training, the previous
// round's aggregate — the paper's momentum form). Precondition n ≥ 2f + 1 (f is only checked).
//
// Like the geometric median, every iterate is β v₀ + Σ α_i x_i, so the iterations run on the
// Gram matrix and the vector is formed once: cost one Gram product O(n²·d) + one read (+ one read
// for the products x_i·v₀ when v₀ ≠ 0, + the median engine for start=median). One iteration
// (ByzFL's default L = 1) runs on the vectors instead: ‖x_i − v₀‖ and the clipped mean in one read
// on one thread (each row added while still in the cache), in two reads with threads. Non-finite
// inputs are excluded (n counts the others) and reported. Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "robust/aggregator.h"

namespace ballot::robust {

enum class ClippingStart { kZero, kMedian };

struct CenteredClippingOptions {
  std::size_t f = 0;
  double tau = 1.0;            // clipping radius τ > 0
  std::size_t iterations = 3;  // L in the paper
  ClippingStart start = ClippingStart::kZero;
  std::vector<float> center;  // when non-empty, v₀ (size d) and `start` is ignored
  std::size_t threads = 1;
};

class CenteredClipping final : public Aggregator {
 public:
  using Options = CenteredClippingOptions;
  CenteredClipping() = default;
  explicit CenteredClipping(Options options) : options_(std::move(options)) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override;  // also τ > 0
  // A center of the wrong size is kInvalidArgument; a non-finite center is kInvalidArgument.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;
  // Sets v₀ for the next calls (e.g. the previous round's output); empty restores `start`.
  void set_center(std::vector<float> center) { options_.center = std::move(center); }

 private:
  Options options_;
};

}  // namespace ballot::robust
