// Pre-aggregators: map n inputs to n' inputs in front of any rule (robust/registry.h pipelines).
//
//   NearestNeighborMixing (NNM; Allouah et al., AISTATS 2023): each input becomes the mean of its
//     n − f nearest inputs (itself included; ties by index). n' = n. Precondition n ≥ 2f + 1.
//     Cost: one Gram product for the distances and one mixing product (n×n)·(n×d), both O(n²·d).
//   Bucketing (Karimireddy, He, Jaggi — ICLR 2022): shuffle the inputs, average consecutive
//     buckets of s. n' = ⌈n / s⌉. The permutation comes from Rng(seed, call number), so a run is
//     reproducible and every call (round) draws a fresh one; shuffle=0 keeps the input order (for a
//     caller that permutes, e.g. to reproduce another library's buckets). Cost: one read, one
//     write of n'·d.
//   NormClipping: x_i ← x_i · min(1, τ / ‖x_i‖). n' = n. Cost: two reads, one write.
//
// Non-finite inputs: NNM and clipping pass them through unchanged (never mixed into a finite
// output) so that the rule after them excludes them; bucketing lets a non-finite input poison its
// own bucket only (which the rule then excludes). Each reports the non-finite inputs it saw.
// Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct NearestNeighborMixingOptions {
  std::size_t f = 0;
  std::size_t threads = 1;
};

class NearestNeighborMixing final : public PreAggregator {
 public:
  using Options = NearestNeighborMixingOptions;
  NearestNeighborMixing() = default;
  explicit NearestNeighborMixing(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override { return check(n, options_.f); }
  Result<PreAggregation> apply(const InputMatrix& inputs) override;

 private:
  Options options_;
};

struct BucketingOptions {
  std::size_t s = 2;  // bucket size ≥ 1
  std::uint64_t seed = 0;
  std::size_t threads = 1;
  bool shuffle = true;  // false: buckets of consecutive inputs in the given order
};

class Bucketing final : public PreAggregator {
 public:
  using Options = BucketingOptions;
  Bucketing() = default;
  explicit Bucketing(Options options) : options_(options) {}
  std::string spec() const override;
  Status check(std::size_t n) const override;
  std::size_t outputs(std::size_t n) const override {
    return options_.s == 0 ? n : n / options_.s + (n % options_.s != 0 ? 1 : 0);
  }
  Result<PreAggregation> apply(const InputMatrix& inputs) override;
  // The call counter that selects the permutation's random stream (call k uses stream k).
  std::uint64_t calls() const noexcept { return calls_; }
  void set_calls(std::uint64_t calls) noexcept { calls_ = calls; }

 private:
  Options options_;
  std::uint64_t calls_ = 0;
};

struct NormClippingOptions {
  double tau = 1.0;  // radius τ > 0
  std::size_t threads = 1;
};

class NormClipping final : public PreAggregator {
 public:
  using Options = NormClippingOptions;
  NormClipping() = default;
  explicit NormClipping(Options options) : options_(options) {}
  std::string spec() const override;
  Status check(std::size_t n) const override;
  Result<PreAggregation> apply(const InputMatrix& inputs) override;
  Result<std::optional<RowScales>> row_scales(const InputMatrix& inputs) override;

 private:
  // The factors, and the clipped rows into `output` (n×d, allocated) when it is not null.
  RowScales clip(const InputMatrix& inputs, Matrix* output) const;
  Options options_;
};

}  // namespace ballot::robust
