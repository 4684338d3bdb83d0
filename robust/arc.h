// ARC, Adaptive Robust Clipping (Allouah, Guerraoui, Gupta, Jellouli, Rizk, Stephan — ICLR 2025,
// "Adaptive Gradient Clipping for Robust Federated Learning", arXiv:2405.14432, first circulated as
// "The Vital Role of Gradient Clipping in Byzantine-Resilient Distributed Learning"). A
// pre-aggregator, as in the paper and in ByzFL: "arc:f=2 > krum:f=2".
//
// With k = ⌊2 (f/n) (n − f)⌋ and C the (k+1)-th largest input norm, every input becomes
// x_i · min(1, C / ‖x_i‖): the k largest inputs are clipped to the norm of the next one, the others
// are unchanged (so ties in norm do not matter). k is computed exactly in integers,
// ⌊2f(n − f) / n⌋. n' = n. Precondition n ≥ 2f + 1 (the paper's f < n/2).
//
// Non-finite inputs rank as the largest norms (they are what an attacker's arbitrarily large input
// would be) and pass through unchanged for the rule after ARC to exclude; every finite input gets
// exactly the output it would get if each non-finite input were replaced by a finite input of
// larger norm than all. Norms from the squared-norm kernel (float lanes, blocks in double), so
// near-equal norms may rank differently than in exact arithmetic, which changes the output only by
// that rounding. Cost: two reads of the inputs, one write. Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct AdaptiveRobustClippingOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class AdaptiveRobustClipping final : public PreAggregator {
 public:
  using Options = AdaptiveRobustClippingOptions;
  AdaptiveRobustClipping() = default;
  explicit AdaptiveRobustClipping(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  // k = ⌊2f(n − f) / n⌋, the number of inputs clipped.
  static std::size_t clipped(std::size_t n, std::size_t f);
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  Result<PreAggregation> apply(const InputMatrix& inputs) override;
  Result<std::optional<RowScales>> row_scales(const InputMatrix& inputs) override;

 private:
  RowScales scales(const InputMatrix& inputs) const;
  Options options_;
};

}  // namespace ballot::robust
