// Coordinate-wise rules: each output coordinate depends only on that coordinate of the inputs.
//
//   Mean              (no defence; the baseline)                      any n ≥ 1
//   CoordinateMedian  (Yin et al., ICML 2018)                          n ≥ 2f + 1
//   TrimmedMean       (Yin et al., ICML 2018): drop the f largest and
//                     the f smallest values per coordinate, average    n ≥ 2f + 1
//   MeanAroundMedian  (MeaMed, Xie et al. 2018): average the n − f
//                     values closest to the median per coordinate      n ≥ 2f + 1
//
// Order statistics use a SIMD selection network over column tiles (n ≤ 128) or std::nth_element
// over transposed tiles (larger n) — never a comparison sort. Cost O(n·d) reads plus O(d·n log²n)
// vector min/max (network) or O(n·d) expected (selection). Non-finite inputs are excluded and
// count against f: with k of them, the rule runs on n − k inputs with f − min(k, f). Outputs are
// bit-identical for every thread count; median, trimmed mean and MeaMed are also bit-identical
// under any permutation of the inputs (they sum sorted values).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct MeanOptions {
  std::size_t threads = 1;
};

class Mean final : public Aggregator {
 public:
  using Options = MeanOptions;
  Mean() = default;
  explicit Mean(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f);
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, 0); }
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;
  bool coordinate_wise() const noexcept override { return true; }
  // The mean of the rows (float)(scales[i] · x_i), bit for bit what aggregate() returns for a
  // matrix holding those products, read straight from the inputs (a clipping stage's output that
  // was never written). scales: n floats in [−1, 1] (so that no product of a finite input
  // overflows), else kInvalidArgument.
  Result<AggregationResult> aggregate_scaled(const InputMatrix& inputs, std::span<const float> scales);

 private:
  Options options_;
};

struct MedianOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class CoordinateMedian final : public Aggregator {
 public:
  using Options = MedianOptions;
  CoordinateMedian() = default;
  explicit CoordinateMedian(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;
  bool coordinate_wise() const noexcept override { return true; }

 private:
  Options options_;
};

struct TrimmedMeanOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class TrimmedMean final : public Aggregator {
 public:
  using Options = TrimmedMeanOptions;
  TrimmedMean() = default;
  explicit TrimmedMean(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;
  bool coordinate_wise() const noexcept override { return true; }

 private:
  Options options_;
};

struct MeanAroundMedianOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class MeanAroundMedian final : public Aggregator {
 public:
  using Options = MeanAroundMedianOptions;
  MeanAroundMedian() = default;
  explicit MeanAroundMedian(Options options) : options_(options) {}
  const Options& options() const noexcept { return options_; }
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;
  bool coordinate_wise() const noexcept override { return true; }

 private:
  Options options_;
};

}  // namespace ballot::robust
