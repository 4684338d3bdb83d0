#include "coding/sparse_codecs.h"

#include <algorithm>
#include <cstring>

#include "coding/detail/sparse.h"
#include "coding/wire_format.h"
#include "core/bit_vector.h"
#include "core/enforce.h"
#include "core/spec.h"

namespace ballot::coding {
namespace {

std::string budget_spec(const char* name, const SparseOptions& options) {
  std::string text = std::string(name) + ":granularity=" + granularity_name(options.granularity);
  if (options.k > 0) return text + ",k=" + std::to_string(options.k);
  return text + ",ratio=" + format_number(options.ratio);
}

std::size_t total(std::span<const std::size_t> counts) {
  std::size_t sum = 0;
  for (auto c : counts) sum += c;
  return sum;
}

}  // namespace

void random_subset(Rng& rng, std::size_t n, std::size_t k, std::vector<std::uint32_t>& out) {
  BALLOT_ENFORCE_LE(k, n);
  BALLOT_ENFORCE_LE(n, std::size_t{UINT32_MAX});
  if (k == 0) return;
  // Floyd's algorithm (Bentley & Floyd, CACM 1987): for j = n-k .. n-1 draw t in [0, j]; take t
  // unless already taken, else j. Every k-subset is equally likely, with exactly k draws.
  // The draws depend on the stream alone, so a batch of them is drawn first and the bitmap words
  // they test are prefetched: at large n each test is otherwise a cache miss, one at a time.
  std::vector<std::uint64_t> taken(BitVector::words_for(n), 0);
  constexpr std::size_t kBatch = 32;
  std::size_t drawn[kBatch];
  for (std::size_t first = n - k; first < n; first += kBatch) {
    const std::size_t count = std::min(kBatch, n - first);
    for (std::size_t b = 0; b < count; ++b) {
      drawn[b] = static_cast<std::size_t>(rng.uniform_int(first + b + 1));
      __builtin_prefetch(&taken[drawn[b] / 64]);
    }
    for (std::size_t b = 0; b < count; ++b) {
      const std::size_t j = first + b;
      std::size_t t = drawn[b];
      if ((taken[t / 64] >> (t % 64)) & 1u) t = j;
      taken[t / 64] |= std::uint64_t{1} << (t % 64);
      out.push_back(static_cast<std::uint32_t>(t));
    }
  }
}

// ---- top-k ----------------------------------------------------------------------------------

std::string TopKCodec::spec() const { return budget_spec("topk", options_); }

std::size_t TopKCodec::wire_size(const GradientLayout& layout) const {
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, options_.k, options_.ratio);
  return kHeaderBytes + 4 * segments.size() + 8 * total(budgets);
}

EncodedGradient TopKCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, options_.k, options_.ratio);
  std::vector<std::uint32_t> indices;
  indices.reserve(total(budgets));
  for (std::size_t s = 0; s < segments.size(); ++s) {
    detail::select_top_k(gradient.data() + segments[s].offset, segments[s].size, budgets[s], indices);
  }
  std::vector<float> values(indices.size());
  std::size_t j = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    for (std::size_t c = 0; c < budgets[s]; ++c, ++j) {
      values[j] = gradient[segments[s].offset + indices[j]];
    }
  }
  return detail::write_sparse(id(), options_.granularity, 0, layout, budgets, indices, values);
}

Status TopKCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                             std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  detail::add_sparse(view, accumulator, weight);
  return {};
}

Result<SparseGradient> TopKCodec::decode_entries(std::span<const std::uint8_t> bytes,
                                                 const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  return detail::entries_of(view);
}

// ---- threshold ------------------------------------------------------------------------------

std::string ThresholdCodec::spec() const { return "threshold:tau=" + format_number(options_.tau); }

std::size_t ThresholdCodec::wire_size(const GradientLayout& layout) const {
  return kHeaderBytes + 4 + 8 * layout.total_size();
}

EncodedGradient ThresholdCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  std::vector<std::uint32_t> indices;
  detail::select_above(gradient.data(), gradient.size(), options_.tau, indices);
  std::vector<float> values(indices.size());
  for (std::size_t j = 0; j < indices.size(); ++j) values[j] = gradient[indices[j]];
  const std::size_t counts[1] = {indices.size()};
  return detail::write_sparse(id(), Granularity::kModel, 0, layout, counts, indices, values);
}

Status ThresholdCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                                  std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  detail::add_sparse(view, accumulator, weight);
  return {};
}

Result<SparseGradient> ThresholdCodec::decode_entries(std::span<const std::uint8_t> bytes,
                                                      const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  return detail::entries_of(view);
}

// ---- random-k -------------------------------------------------------------------------------

std::string RandomKCodec::spec() const { return budget_spec("randomk", options_); }

std::size_t RandomKCodec::wire_size(const GradientLayout& layout) const {
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, options_.k, options_.ratio);
  return kHeaderBytes + 4 * segments.size() + 24 + 4 * total(budgets);
}

EncodedGradient RandomKCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, options_.k, options_.ratio);
  EncodedGradient out;
  write_header(out.bytes, id(), options_.granularity, 0, layout, 4 * segments.size() + 24 + 4 * total(budgets));
  for (std::size_t c : budgets) append_pod<std::uint32_t>(out.bytes, static_cast<std::uint32_t>(c));
  append_pod<std::uint64_t>(out.bytes, rng.seed());
  append_pod<std::uint64_t>(out.bytes, rng.stream());
  append_pod<std::uint64_t>(out.bytes, rng.position());
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  values.reserve(total(budgets));
  for (std::size_t s = 0; s < segments.size(); ++s) {
    indices.clear();
    random_subset(rng, segments[s].size, budgets[s], indices);
    // Unbiased: each coordinate is kept with probability k/n, so scale by n/k.
    const float scale =
        budgets[s] == 0 ? 0.0f
                        : static_cast<float>(static_cast<double>(segments[s].size) / static_cast<double>(budgets[s]));
    for (std::uint32_t i : indices) values.push_back(scale * gradient[segments[s].offset + i]);
  }
  append_pods<float>(out.bytes, values);
  return out;
}

Status RandomKCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                                std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_random_k(bytes, layout));
  // The indices are regenerated from the stream: valid by construction.
  Rng rng(view.seed, view.stream);
  rng.seek(view.position);
  std::vector<std::uint32_t> indices;
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    indices.clear();
    random_subset(rng, view.segments[s].size, view.counts[s], indices);
    float* base = accumulator.data() + view.segments[s].offset;
    for (std::uint32_t i : indices) base[i] += weight * load_pod<float>(view.values.data() + 4 * j++);
  }
  return {};
}

Result<SparseGradient> RandomKCodec::decode_entries(std::span<const std::uint8_t> bytes,
                                                    const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_random_k(bytes, layout));
  Rng rng(view.seed, view.stream);
  rng.seek(view.position);
  SparseGradient out;
  std::vector<std::uint32_t> indices;
  std::vector<std::pair<std::uint32_t, float>> segment;
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    indices.clear();
    random_subset(rng, view.segments[s].size, view.counts[s], indices);
    // Distinct indices in draw order: sorted within the segment (the segments are in order).
    segment.clear();
    for (const std::uint32_t i : indices) segment.emplace_back(i, 0.0f + load_pod<float>(view.values.data() + 4 * j++));
    std::sort(segment.begin(), segment.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [i, v] : segment) {
      out.indices.push_back(view.segments[s].offset + i);
      out.values.push_back(v);
    }
  }
  return out;
}

}  // namespace ballot::coding
