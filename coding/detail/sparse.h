// Internals of the sparse codecs (top-k, threshold, global top-k): selection and the
// (counts, indices, values) wire format.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "coding/codec.h"
#include "coding/wire_format.h"
#include "core/rng.h"

namespace ballot::coding::detail {

// The k entries of x (size n) with the largest magnitude, by selection (expected O(n)): a strided
// sample estimates a threshold a little below the k-th magnitude, one pass keeps the candidates
// above it, and an exact selection among the candidates finishes. NaN counts as +inf (a worker
// with NaN gradients sends them, for the aggregator to reject). Ties at the k-th magnitude go to
// the lowest indices. Appends the selected indices (relative to x, increasing) to `indices`.
void select_top_k(const float* x, std::size_t n, std::size_t k, std::vector<std::uint32_t>& indices);

// DGC's selection (Lin et al., ICLR 2018): at most k entries of x by a threshold estimated from
// `samples` magnitudes drawn uniformly with replacement through `rng` (the k·samples/n-th largest
// of them). Every |x_i| >= threshold (or NaN) is selected; if fewer than kSampledLowerBound·k
// pass, the threshold is lowered to twice the sample rank and the pass repeated (down to 0); if
// more than k pass, an exact top-k among them finishes (ties to the lowest index). So the count
// is in [min(k, ⌈0.8k⌉), k], and the selected entries are always the largest magnitudes. With
// samples = 0, samples >= n or k >= n it is select_top_k. Appends increasing indices.
inline constexpr double kSampledLowerBound = 0.8;
struct SampledSelection {
  float threshold = 0;         // the last threshold used
  std::size_t first_pass = 0;  // entries above the first (sampled) estimate
  std::size_t selected = 0;
  int passes = 0;      // passes over x
  bool exact = false;  // an exact top-k finished the selection
};
SampledSelection select_by_sampled_threshold(const float* x, std::size_t n, std::size_t k, std::size_t samples,
                                             Rng& rng, std::vector<std::uint32_t>& indices);

// The selection key of a magnitude: |v|, NaN as +inf (codec_logic.h's magnitude_key as a float).
inline float selection_key(float v) {
  const float a = std::fabs(v);
  return a != a ? std::numeric_limits<float>::infinity() : a;
}

// The passes of select_by_sampled_threshold once its sample is drawn, for callers whose x lives
// elsewhere (the GPU): `sample_keys` holds selection_key of each drawn coordinate (it is
// reordered); pass(t) selects the candidates !(|x_i| < t) of the segment and returns how many.
// The result's `selected` is min(count, k) of the last pass, and `exact` says that more than k
// passed: the caller then finishes with the exact top-k (which, as every entry not passing is below
// the threshold, is the top-k of the whole segment).
SampledSelection sampled_threshold_passes(std::span<float> sample_keys, std::size_t n, std::size_t k,
                                          const std::function<std::size_t(float)>& pass);

// Appends indices i with |x_i| >= threshold (or NaN), increasing.
void select_above(const float* x, std::size_t n, float threshold, std::vector<std::uint32_t>& indices);

// Budget per segment: `k` > 0 is a count, min(k, d) in all: one for each non-empty segment when
// it is at least their number (so that every layer is sent), the rest split in proportion to what
// each segment has left, largest remainders first; otherwise ⌈ratio · size⌉ per segment, capped
// at its size.
std::vector<std::size_t> sparse_budgets(std::span<const Segment> segments, std::size_t k, double ratio);

// Wire payload: S u32 counts, Σ u32 indices (relative to the segment, strictly increasing within
// it), Σ f32 values. `indices` are relative to their segment, grouped by segment.
EncodedGradient write_sparse(CodecId id, Granularity granularity, std::uint8_t flags, const GradientLayout& layout,
                             std::span<const std::size_t> counts, std::span<const std::uint32_t> indices,
                             std::span<const float> values);

struct SparseView {
  WireHeader header;
  std::vector<Segment> segments;
  std::vector<std::uint32_t> counts;
  std::span<const std::uint8_t> indices;  // u32 each
  std::span<const std::uint8_t> values;   // f32 each
};
// Parses and fully validates a sparse message (every count, every index, the ordering).
Result<SparseView> read_sparse(std::span<const std::uint8_t> bytes, CodecId id, std::uint8_t allowed_flags,
                               const GradientLayout& layout);
// Random-k's message (coding/sparse_codecs.h): counts (each at most its segment's size), the index
// stream's seed, stream and position, and the values; the indices are regenerated from the stream.
struct RandomKView {
  std::vector<Segment> segments;
  std::vector<std::uint32_t> counts;
  std::uint64_t seed = 0, stream = 0, position = 0;
  std::span<const std::uint8_t> values;  // f32 each, sum(counts) of them
};
Result<RandomKView> read_random_k(std::span<const std::uint8_t> bytes, const GradientLayout& layout);
// accumulator[offset + index] += weight * value for a validated view.
void add_sparse(const SparseView& view, std::span<float> accumulator, float weight);
// A validated view's entries as decode() writes them (0 + value: −0 becomes +0).
SparseGradient entries_of(const SparseView& view);

}  // namespace ballot::coding::detail
