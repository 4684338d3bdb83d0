// Internals of the sparse codecs (top-k, threshold, global top-k): selection and the
// (counts, indices, values) wire format.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "coding/codec.h"
#include "coding/wire_format.h"

namespace ballot::coding::detail {

// The k entries of x (size n) with the largest magnitude, by selection (expected O(n)): a strided
// sample estimates a threshold a little below the k-th magnitude, one pass keeps the candidates
// above it, and an exact selection among the candidates finishes. NaN counts as +inf (a worker
// with NaN gradients sends them, for the aggregator to reject). Ties at the k-th magnitude go to
// the lowest indices. Appends the selected indices (relative to x, increasing) to `indices`.
void select_top_k(const float* x, std::size_t n, std::size_t k, std::vector<std::uint32_t>& indices);

// Appends indices i with |x_i| >= threshold (or NaN), increasing.
void select_above(const float* x, std::size_t n, float threshold, std::vector<std::uint32_t>& indices);

// Budget per segment: `k` > 0 is a count (split over the segments in proportion to their size,
// largest remainders first, so the counts add up to min(k, d)); otherwise ⌈ratio · size⌉ per
// segment, capped at its size.
std::vector<std::size_t> sparse_budgets(std::span<const Segment> segments, std::size_t k,
                                        double ratio);

// Wire payload: S u32 counts, Σ u32 indices (relative to the segment, strictly increasing within
// it), Σ f32 values. `indices` are relative to their segment, grouped by segment.
EncodedGradient write_sparse(CodecId id, Granularity granularity, std::uint8_t flags,
                             const GradientLayout& layout, std::span<const std::size_t> counts,
                             std::span<const std::uint32_t> indices, std::span<const float> values);

struct SparseView {
  WireHeader header;
  std::vector<Segment> segments;
  std::vector<std::uint32_t> counts;
  std::span<const std::uint8_t> indices;  // u32 each
  std::span<const std::uint8_t> values;   // f32 each
};
// Parses and fully validates a sparse message (every count, every index, the ordering).
Result<SparseView> read_sparse(std::span<const std::uint8_t> bytes, CodecId id,
                               std::uint8_t allowed_flags, const GradientLayout& layout);
// accumulator[offset + index] += weight * value for a validated view.
void add_sparse(const SparseView& view, std::span<float> accumulator, float weight);

}  // namespace ballot::coding::detail
