// Bulyan (El Mhamdi, Guerraoui, Rouault — ICML 2018).
//
// 1. Selection: θ = n − 2f inputs by repeated Krum — take the Krum winner of the remaining set
//    (its score over |remaining| − f − 2 neighbours), remove it, repeat.
// 2. Aggregation: per coordinate, the mean of the β = θ − 2f selected values closest to their
//    median.
// Precondition n ≥ 4f + 3. Cost: one Gram matrix product (O(n²·d)), O(θ·n² log n) for the
// selection, then the coordinate-wise engine over θ rows (see coordinate_wise.h), whose network
// only sorts the ranks within β of the median (the β closest values form a window that holds a
// middle rank). Non-finite inputs are never
// selected; if fewer than θ inputs are usable the result is kPrecondition. Deterministic for any
// thread count; ties go to the lowest index.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct BulyanOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class Bulyan final : public Aggregator {
 public:
  using Options = BulyanOptions;
  Bulyan() = default;
  explicit Bulyan(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 4f + 3
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  // report.selected: the θ inputs of step 1.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
