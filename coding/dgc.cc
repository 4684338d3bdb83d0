#include "coding/dgc.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/detail/sparse.h"
#include "coding/wire_format.h"
#include "core/enforce.h"
#include "core/spec.h"

namespace ballot::coding {
namespace {

// Enough samples that ~8 of them are expected above the threshold (with fewer, the estimate is
// mostly the sample maximum and the lowering loop takes over).
constexpr double kExpectedAboveInSample = 8.0;

}  // namespace

DgcCodec::DgcCodec(DgcOptions options) : options_(options) {
  BALLOT_ENFORCE(options_.ratio > 0.0 && options_.ratio <= 1.0, "DGC needs ratio in (0, 1]");
  BALLOT_ENFORCE(options_.momentum >= 0.0f && options_.momentum < 1.0f, "DGC needs momentum in [0, 1)");
  BALLOT_ENFORCE(options_.clip >= 0.0f && std::isfinite(options_.clip), "DGC needs a finite clip >= 0");
  BALLOT_ENFORCE(options_.warmup_start > 0.0 && options_.warmup_start <= 1.0, "DGC needs warmup_start in (0, 1]");
  BALLOT_ENFORCE(options_.sample > 0.0 && options_.sample <= 1.0, "DGC needs sample in (0, 1]");
}

std::string DgcCodec::spec() const {
  return "dgc:clip=" + format_number(options_.clip) + ",granularity=" + granularity_name(options_.granularity) +
         ",momentum=" + format_number(options_.momentum) + ",ratio=" + format_number(options_.ratio) +
         ",sample=" + format_number(options_.sample) + ",warmup=" + std::to_string(options_.warmup) +
         ",warmup_start=" + format_number(options_.warmup_start);
}

double DgcCodec::density(std::uint64_t round) const noexcept {
  if (options_.warmup == 0 || round >= options_.warmup) return options_.ratio;
  // Lin et al. 2018, §3.3: the sparsity rises exponentially during warm-up (75%, 93.75%, ...,
  // 99.9% over the first epochs); here continuously over `warmup` rounds.
  const double progress = static_cast<double>(round) / static_cast<double>(options_.warmup);
  return options_.warmup_start * std::pow(options_.ratio / options_.warmup_start, progress);
}

std::size_t DgcCodec::sample_count(std::size_t n, std::size_t k) const noexcept {
  if (n < kExactBelow) return 0;
  const double wanted =
      std::max(options_.sample * static_cast<double>(n),
               kExpectedAboveInSample * static_cast<double>(n) / static_cast<double>(std::max<std::size_t>(k, 1)));
  return static_cast<std::size_t>(std::min(std::ceil(wanted), static_cast<double>(n)));
}

std::size_t DgcCodec::wire_size(const GradientLayout& layout) const {
  const auto segments = segments_of(layout, options_.granularity);
  const double largest = options_.warmup > 0 ? std::max(options_.ratio, options_.warmup_start) : options_.ratio;
  std::size_t kept = 0;
  for (std::size_t k : detail::sparse_budgets(segments, 0, largest)) kept += k;
  return kHeaderBytes + 4 * segments.size() + 8 * kept;
}

EncodedGradient DgcCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const std::size_t d = gradient.size();
  if (momentum_.size() != d) {
    momentum_.assign(d, 0.0f);
    velocity_.assign(d, 0.0f);
  }
  const auto segments = segments_of(layout, options_.granularity);
  const auto budgets = detail::sparse_budgets(segments, 0, density(rounds_));
  std::vector<std::size_t> counts(segments.size(), 0);
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const std::size_t offset = segments[s].offset, n = segments[s].size;
    float* u = momentum_.data() + offset;
    float* v = velocity_.data() + offset;
    // §3.2: clip the local gradient by its L2 norm before it enters the accumulation.
    const float factor = options_.clip > 0.0f
                             ? detail::dgc_clip_factor(detail::sum_squares(gradient.data() + offset, n), options_.clip)
                             : 1.0f;
    detail::momentum_accumulate(gradient.data() + offset, n, factor, options_.momentum, u, v);
    const std::size_t at = indices.size();
    detail::select_by_sampled_threshold(v, n, budgets[s], sample_count(n, budgets[s]), rng, indices);
    counts[s] = indices.size() - at;
    // §3.2, momentum factor masking: what is sent leaves both the accumulation and the momentum.
    for (std::size_t j = at; j < indices.size(); ++j) {
      const std::uint32_t i = indices[j];
      values.push_back(v[i]);
      v[i] = 0.0f;
      u[i] = 0.0f;
    }
  }
  ++rounds_;
  return detail::write_sparse(id(), options_.granularity, 0, layout, counts, indices, values);
}

Status DgcCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                            std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  detail::add_sparse(view, accumulator, weight);
  return {};
}

Result<SparseGradient> DgcCodec::decode_entries(std::span<const std::uint8_t> bytes,
                                                const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id(), 0, layout));
  return detail::entries_of(view);
}

std::vector<std::uint8_t> DgcCodec::state_blob(std::span<const float> momentum, std::span<const float> velocity,
                                               std::uint64_t rounds) {
  std::uint8_t count[8];
  std::memcpy(count, &rounds, 8);
  const auto inner = write_state(CodecId::kDgc, momentum, count);
  return write_state(CodecId::kDgc, velocity, inner);
}

std::vector<std::uint8_t> DgcCodec::save_state() const { return state_blob(momentum_, velocity_, rounds_); }

Status DgcCodec::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(StateView outer, read_state(state, id(), layout));
  BALLOT_ASSIGN_OR_RETURN(StateView inner, read_state(outer.inner, id(), layout));
  if (inner.inner.size() != 8) return malformed("DGC state: the round count must be 8 bytes");
  if (outer.memory.size() != inner.memory.size()) {
    return malformed("DGC state: accumulation and momentum have different sizes");
  }
  velocity_ = std::move(outer.memory);
  momentum_ = std::move(inner.memory);
  std::memcpy(&rounds_, inner.inner.data(), 8);
  return {};
}

void DgcCodec::reset_state() {
  momentum_.clear();
  velocity_.clear();
  rounds_ = 0;
}

}  // namespace ballot::coding
