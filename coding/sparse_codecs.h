// Sparsifying codecs: top-k, random-k, threshold.
//
//   topk       keep the k largest |g_i| per segment (Aji & Heafield 2017), by selection
//   randomk    keep k coordinates chosen by a seeded stream, each scaled by n_s/k_s so that
//              E[decode] = g (unbiased); the indices are not sent, only the stream position
//   threshold  keep every |g_i| >= tau (Strom 2015; size depends on the data)
// The budget k is a count (`k` > 0, split over the layers in proportion to their sizes) or a
// `ratio` (⌈ratio·n_s⌉ per segment). NaN counts as the largest magnitude.
// Wire (docs/codecs.md): topk/threshold: S u32 counts, then the u32 indices (relative to the
// segment, increasing), then the f32 values: 24 + 4S + 8K bytes. randomk: S u32 counts, u64 seed,
// u64 stream, u64 position of the index stream, then the f32 values: 24 + 4S + 24 + 4K bytes.
// Segments must have fewer than 2^32 coordinates. Encode: expected O(d) (top-k: one pass plus a
// selection among ~1.2k candidates; random-k: O(K) plus an n-bit mask).
#pragma once

#include <cstddef>

#include "coding/codec.h"

namespace ballot::coding {

struct SparseOptions {
  std::size_t k = 0;    // a count when > 0
  double ratio = 0.01;  // otherwise this fraction of each segment
  Granularity granularity = Granularity::kModel;
};

class TopKCodec final : public Codec {
 public:
  explicit TopKCodec(SparseOptions options = {}) : options_(options) {}

  const SparseOptions& options() const noexcept { return options_; }
  CodecId id() const noexcept override { return CodecId::kTopK; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  bool sparse_decode() const noexcept override { return true; }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

 private:
  SparseOptions options_;
};

class RandomKCodec final : public Codec {
 public:
  explicit RandomKCodec(SparseOptions options = {}) : options_(options) {}

  const SparseOptions& options() const noexcept { return options_; }
  CodecId id() const noexcept override { return CodecId::kRandomK; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  bool sparse_decode() const noexcept override { return true; }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

 private:
  SparseOptions options_;
};

struct ThresholdOptions {
  float tau = 1e-3f;  // keep |g_i| >= tau
};

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(ThresholdOptions options = {}) : options_(options) {}

  const ThresholdOptions& options() const noexcept { return options_; }
  CodecId id() const noexcept override { return CodecId::kThreshold; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return Granularity::kModel; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  bool sparse_decode() const noexcept override { return true; }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override;
  // Upper bound (every coordinate kept): 24 + 4 + 8d.
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;
  bool exact_wire_size() const noexcept override { return false; }

 private:
  ThresholdOptions options_;
};

// k distinct indices of [0, n) drawn from `rng` by Floyd's algorithm, in generation order (the
// random-k index stream; encoder and decoder both call it). k <= n.
void random_subset(Rng& rng, std::size_t n, std::size_t k, std::vector<std::uint32_t>& out);

}  // namespace ballot::coding
