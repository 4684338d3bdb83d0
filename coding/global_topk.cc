#include "coding/global_topk.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "coding/detail/sparse.h"
#include "coding/wire_format.h"
#include "core/enforce.h"
#include "core/spec.h"
#include "kernels/float_entries.h"

namespace ballot::coding {
namespace {

std::size_t total(std::span<const std::size_t> counts) {
  std::size_t sum = 0;
  for (auto c : counts) sum += c;
  return sum;
}

// Top-k of `dense` per segment, as a sparse message.
EncodedGradient sparse_top_k(std::span<const float> dense, const GradientLayout& layout, const SparseOptions& options,
                             std::uint8_t flags, std::vector<std::size_t>* global_indices) {
  const auto segments = segments_of(layout, options.granularity);
  const auto budgets = detail::sparse_budgets(segments, options.k, options.ratio);
  std::vector<std::uint32_t> indices;
  indices.reserve(total(budgets));
  for (std::size_t s = 0; s < segments.size(); ++s) {
    detail::select_top_k(dense.data() + segments[s].offset, segments[s].size, budgets[s], indices);
  }
  std::vector<float> values(indices.size());
  std::size_t j = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    for (std::size_t c = 0; c < budgets[s]; ++c, ++j) {
      const std::size_t global = segments[s].offset + indices[j];
      values[j] = dense[global];
      if (global_indices != nullptr) global_indices->push_back(global);
    }
  }
  return detail::write_sparse(CodecId::kGlobalTopK, options.granularity, flags, layout, budgets, indices, values);
}

}  // namespace

std::string GlobalTopKCodec::spec() const {
  std::string text = std::string("gtopk:granularity=") + granularity_name(options_.granularity);
  if (options_.k > 0) return text + ",k=" + std::to_string(options_.k);
  return text + ",ratio=" + format_number(options_.ratio);
}

std::size_t GlobalTopKCodec::wire_size(const GradientLayout& layout) const {
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, options_.k, options_.ratio);
  return kHeaderBytes + 4 * segments.size() + 8 * total(budgets);
}

EncodedGradient GlobalTopKCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  if (residual_.size() != gradient.size()) residual_.assign(gradient.size(), 0.0f);
  // Shi et al. 2019, Alg. 2: accumulate the residual, select locally, keep the rest.
  for (std::size_t i = 0; i < gradient.size(); ++i) residual_[i] += gradient[i];
  sent_indices_.clear();
  EncodedGradient out = sparse_top_k(residual_, layout, options_, 0, &sent_indices_);
  sent_values_.resize(sent_indices_.size());
  for (std::size_t j = 0; j < sent_indices_.size(); ++j) {
    sent_values_[j] = residual_[sent_indices_[j]];
    residual_[sent_indices_[j]] = 0.0f;
  }
  return out;
}

Status GlobalTopKCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                                   std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), kGlobalFlag, layout));
  detail::add_sparse(view, accumulator, weight);
  return {};
}

Result<SparseGradient> GlobalTopKCodec::decode_entries(std::span<const std::uint8_t> bytes,
                                                       const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), kGlobalFlag, layout));
  return detail::entries_of(view);
}

Status GlobalTopKCodec::accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(global, id(), kGlobalFlag, layout));
  if (!(view.header.flags & kGlobalFlag)) {
    return malformed("accept_global() got a worker message, not the aggregator's global set");
  }
  if (residual_.size() != layout.total_size()) return {};  // nothing sent yet
  // Both lists are increasing (sent_indices_ by segment then index, the global set likewise): a
  // merge finds the sent indices that were not selected globally.
  std::vector<std::size_t> chosen;
  chosen.reserve(view.indices.size() / 4);
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    for (std::uint32_t c = 0; c < view.counts[s]; ++c, ++j) {
      chosen.push_back(view.segments[s].offset + load_pod<std::uint32_t>(view.indices.data() + 4 * j));
    }
  }
  std::size_t g = 0;
  for (std::size_t t = 0; t < sent_indices_.size(); ++t) {
    const std::size_t index = sent_indices_[t];
    while (g < chosen.size() && chosen[g] < index) ++g;
    if (g < chosen.size() && chosen[g] == index) continue;
    // A non-finite value (from a non-finite gradient) went out once; kept, it would be selected
    // and sent every round after.
    if (std::isfinite(sent_values_[t])) residual_[index] += sent_values_[t];
  }
  sent_indices_.clear();
  sent_values_.clear();
  return {};
}

std::vector<std::uint8_t> GlobalTopKCodec::save_state() const {
  // Checkpoints are taken at round boundaries, after accept_global(); a selection still waiting
  // for its global set is not part of the state (the round is redone after a restart).
  return write_state(id(), residual_);
}

Status GlobalTopKCodec::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(StateView view, read_state(state, id(), layout));
  if (!view.inner.empty()) return malformed("gtopk state has an unexpected inner state");
  residual_ = std::move(view.memory);
  sent_indices_.clear();
  sent_values_.clear();
  return {};
}

void GlobalTopKCodec::drop_selection() noexcept {
  sent_indices_.clear();
  sent_values_.clear();
}

void GlobalTopKCodec::reset_state() {
  residual_.clear();
  sent_indices_.clear();
  sent_values_.clear();
}

Result<EncodedGradient> global_topk_reduce(std::span<const std::span<const std::uint8_t>> messages,
                                           const GradientLayout& layout, const GlobalTopKReduceOptions& options) {
  std::vector<float> sum(layout.total_size(), 0.0f);
  for (std::size_t m = 0; m < messages.size(); ++m) {
    auto view = detail::read_sparse(messages[m], CodecId::kGlobalTopK, 0, layout);
    if (!view.ok()) {
      Error error = std::move(view).error();
      error.message = "gtopk message " + std::to_string(m) + ": " + error.message;
      return error;
    }
    detail::add_sparse(*view, sum, 1.0f);
  }
  if (options.average && !messages.empty()) {
    const float inv = 1.0f / static_cast<float>(messages.size());
    for (float& v : sum) v *= inv;
  }
  return sparse_top_k(sum, layout, options.budget, GlobalTopKCodec::kGlobalFlag, nullptr);
}

void keep_global_top_k(std::span<float> aggregate, const GradientLayout& layout, const SparseOptions& budget) {
  BALLOT_ENFORCE_EQ(aggregate.size(), layout.total_size());
  const auto segments = segments_of(layout, budget.granularity);
  const auto budgets = detail::sparse_budgets(segments, budget.k, budget.ratio);
  std::vector<std::uint32_t> indices;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    indices.clear();
    float* x = aggregate.data() + segments[s].offset;
    detail::select_top_k(x, segments[s].size, budgets[s], indices);
    // The selection is increasing: zero everything between consecutive selected indices.
    std::size_t next = 0;
    for (const std::uint32_t keep : indices) {
      std::fill(x + next, x + keep, 0.0f);
      next = std::size_t{keep} + 1;
    }
    std::fill(x + next, x + segments[s].size, 0.0f);
  }
}

EncodedGradient global_set_of(std::span<const float> applied, const GradientLayout& layout, Granularity granularity) {
  BALLOT_ENFORCE_EQ(applied.size(), layout.total_size());
  // The entries (every value but +0), scanned a segment at a time (u32 indices within each).
  SparseGradient entries;
  std::vector<std::uint32_t> in_segment;
  for (const auto& segment : segments_of(layout, granularity)) {
    in_segment.clear();
    kernels::append_entries(applied.subspan(segment.offset, segment.size), in_segment);
    for (const std::uint32_t i : in_segment) {
      entries.indices.push_back(segment.offset + i);
      entries.values.push_back(applied[segment.offset + i]);
    }
  }
  return global_set_of(entries, layout, granularity);
}

EncodedGradient global_set_of(const SparseGradient& applied, const GradientLayout& layout, Granularity granularity) {
  const auto& listed = applied.indices;
  BALLOT_ENFORCE_EQ(listed.size(), applied.values.size());
  BALLOT_ENFORCE(std::adjacent_find(listed.begin(), listed.end(), std::greater_equal<>()) == listed.end() &&
                 (listed.empty() || listed.back() < layout.total_size()));
  const auto segments = segments_of(layout, granularity);
  std::vector<std::size_t> counts(segments.size(), 0);
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::size_t k = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const std::size_t offset = segments[s].offset, end = offset + segments[s].size;
    const std::size_t first = indices.size();
    for (; k < listed.size() && listed[k] < end; ++k) {
      const float value = applied.values[k];
      if (value == 0.0f) continue;  // ±0: not applied (NaN compares unequal, so it is)
      indices.push_back(static_cast<std::uint32_t>(listed[k] - offset));
      values.push_back(value);
    }
    counts[s] = indices.size() - first;
  }
  return detail::write_sparse(CodecId::kGlobalTopK, granularity, GlobalTopKCodec::kGlobalFlag, layout, counts, indices,
                              values);
}

}  // namespace ballot::coding
