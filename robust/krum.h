// Krum and Multi-Krum (Blanchard, El Mhamdi, Guerraoui, Stainer — NeurIPS 2017).
//
// score(i) = Σ of the squared distances from x_i to its n − f − 2 nearest other inputs.
// Krum outputs the input of smallest score; Multi-Krum the mean of the m inputs of smallest scores
// (m = n − f by default). Precondition n ≥ 2f + 3.
//
// All pairwise distances come from one Gram matrix product (‖x‖² + ‖y‖² − 2x·y; register-blocked
// kernels of ours — 4×4 rows up to 32 inputs, packed 5×5 above with AVX-512, Eigen's rank update
// above 32 at the other ISA levels; float products accumulated in double per 4096 columns), so the
// cost is n(n+1)/2·d multiply-adds at matrix-product speed plus one read of the selected inputs. Non-finite inputs (and
// inputs so large that their squared norm overflows) are at +∞ from everything: they never get a finite score and are
// never selected. Ties go to the lowest index. Deterministic for any thread count; the selection is
// permutation-invariant except on exact score ties. Rounding note: the Gram form loses relative precision when the
// inputs share a large common offset compared with their spread.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct KrumOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class Krum final : public Aggregator {
 public:
  using Options = KrumOptions;
  Krum() = default;
  explicit Krum(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 3
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  // report.scores holds every input's score (+∞ for unusable inputs); report.selected the winner.
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

struct MultiKrumOptions {
  std::size_t f = 0;
  std::size_t m = 0;  // inputs averaged; 0 means n − f
  std::size_t threads = 1;
};

class MultiKrum final : public Aggregator {
 public:
  using Options = MultiKrumOptions;
  MultiKrum() = default;
  explicit MultiKrum(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f, std::size_t m);  // n ≥ 2f + 3, m ≤ n
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f, options_.m); }
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
