#include "robust/pre_aggregators.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/rng.h"
#include "robust/detail/common.h"

namespace ballot::robust {

// ---- NNM ----------------------------------------------------------------------------------------

Status NearestNeighborMixing::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "nnm needs at least one input");
  if (n < 2 * f + 1) return detail::precondition_error("nnm", "n >= 2f + 1", n, f);
  return {};
}

std::string NearestNeighborMixing::spec() const {
  return detail::with_threads("nnm:f=" + std::to_string(options_.f), options_.threads);
}

Result<PreAggregation> NearestNeighborMixing::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d();
  const detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) usable.push_back(i);
  const std::size_t u = usable.size();
  const std::size_t k = std::min(u, n - options_.f);  // neighbours per input, itself included

  // Mixing matrix over the usable inputs: row a has 1/k on a's k nearest (Allouah et al., Alg. 1).
  std::vector<float> mixing(u * u, 0.0f);
  std::vector<std::size_t> order(u);
  for (std::size_t a = 0; a < u; ++a) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return dist.at(usable[a], usable[x]) < dist.at(usable[a], usable[y]);
    });
    for (std::size_t r = 0; r < k; ++r) mixing[a * u + order[r]] = 1.0f / static_cast<float>(k);
  }

  PreAggregation out;
  out.non_finite = dist.non_finite;
  out.output.n = n;
  out.output.d = d;
  out.output.values.resize(n * d);
  for (std::size_t i = 0; i < n; ++i)  // unusable inputs pass through for the rule to exclude
    if (!dist.usable[i]) std::memcpy(out.output.values.data() + i * d, inputs.row(i), d * sizeof(float));
  if (u == 0) return out;

  // One mixing product per column block: the usable rows are gathered into a block (L2-sized),
  // multiplied by the mixing matrix, and scattered to their rows. With few rows the product is a
  // handful of axpys per output row from L1 (Eigen's kernel would be mostly padding, as for the
  // Gram matrix).
  const auto& kern = detail::isa_kernels();
  constexpr std::size_t kBlock = 1024;
  const std::size_t blocks = (d + kBlock - 1) / kBlock;
  detail::parallel_for(blocks, options_.threads, [&](std::size_t b0, std::size_t b1) {
    std::vector<float> in(u * kBlock), mixed(u * kBlock);
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t begin = b * kBlock, width = std::min(kBlock, d - begin);
      for (std::size_t a = 0; a < u; ++a)
        std::memcpy(in.data() + a * width, inputs.row(usable[a]) + begin, width * sizeof(float));
      if (u <= 32) {
        for (std::size_t a = 0; a < u; ++a) {
          float* dst = out.output.values.data() + usable[a] * d + begin;
          std::fill(dst, dst + width, 0.0f);
          for (std::size_t c = 0; c < u; ++c)
            if (mixing[a * u + c] != 0.0f) kern.axpy(mixing[a * u + c], in.data() + c * width, dst, width);
        }
        continue;
      }
      kern.mix(mixing.data(), u, in.data(), u, width, width, mixed.data(), width);
      for (std::size_t a = 0; a < u; ++a)
        std::memcpy(out.output.values.data() + usable[a] * d + begin, mixed.data() + a * width,
                    width * sizeof(float));
    }
  });
  return out;
}

// ---- Bucketing ----------------------------------------------------------------------------------

std::string Bucketing::spec() const {
  return detail::with_threads("bucketing:s=" + std::to_string(options_.s) + ",seed=" + std::to_string(options_.seed),
                              options_.threads);
}

Status Bucketing::check(std::size_t n) const {
  if (options_.s == 0) return make_error(ErrorCode::kInvalidArgument, "bucketing: s must be >= 1");
  if (n == 0) return make_error(ErrorCode::kPrecondition, "bucketing needs at least one input");
  return {};
}

Result<PreAggregation> Bucketing::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d(), s = options_.s;
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(options_.seed, calls_++);
  rng.shuffle(std::span<std::size_t>(perm));
  const std::size_t buckets = (n + s - 1) / s;

  PreAggregation out;
  out.output.n = buckets;
  out.output.d = d;
  out.output.values.resize(buckets * d);
  const auto& kern = detail::isa_kernels();
  detail::parallel_for(buckets, options_.threads, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t first = b * s, last = std::min(n, first + s);
      const float scale = 1.0f / static_cast<float>(last - first);
      float* dst = out.output.values.data() + b * d;
      kern.scale_copy(scale, inputs.row(perm[first]), dst, d);
      for (std::size_t k = first + 1; k < last; ++k) kern.axpy(scale, inputs.row(perm[k]), dst, d);
    }
  });
  // A non-finite input makes its bucket non-finite; name the inputs behind such buckets.
  for (std::size_t b = 0; b < buckets; ++b) {
    if (kern.all_finite(out.output.values.data() + b * d, d)) continue;
    for (std::size_t k = b * s; k < std::min(n, b * s + s); ++k)
      if (!kern.all_finite(inputs.row(perm[k]), d)) out.non_finite.push_back(perm[k]);
  }
  std::sort(out.non_finite.begin(), out.non_finite.end());
  return out;
}

// ---- Norm clipping ------------------------------------------------------------------------------

std::string NormClipping::spec() const {
  return detail::with_threads("clipping:tau=" + detail::format_double(options_.tau), options_.threads);
}

Status NormClipping::check(std::size_t n) const {
  if (!(options_.tau > 0) || !std::isfinite(options_.tau))
    return make_error(ErrorCode::kInvalidArgument, "clipping: tau must be finite and > 0");
  if (n == 0) return make_error(ErrorCode::kPrecondition, "clipping needs at least one input");
  return {};
}

Result<PreAggregation> NormClipping::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& kern = detail::isa_kernels();
  PreAggregation out;
  out.output.n = n;
  out.output.d = d;
  out.output.values.resize(n * d);
  std::vector<std::uint8_t> bad(n, 0);
  detail::parallel_for(n, options_.threads, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      float* dst = out.output.values.data() + i * d;
      const double norm = std::sqrt(kern.squared_norm(inputs.row(i), d));
      if (!std::isfinite(norm) && !kern.all_finite(inputs.row(i), d)) {
        bad[i] = 1;
        std::memcpy(dst, inputs.row(i), d * sizeof(float));
        continue;
      }
      const double scale = norm > options_.tau ? options_.tau / norm : 1.0;
      kern.scale_copy(static_cast<float>(scale), inputs.row(i), dst, d);
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (bad[i]) out.non_finite.push_back(i);
  return out;
}

}  // namespace ballot::robust
