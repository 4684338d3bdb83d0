#include "robust/centered_clipping.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "robust/coordinate_wise.h"
#include "robust/detail/common.h"

namespace ballot::robust {

Status CenteredClipping::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "centered_clipping needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("centered_clipping", "n >= 2f + 1", n, f);
  return {};
}

Status CenteredClipping::check(std::size_t n) const {
  if (!(options_.tau > 0) || !std::isfinite(options_.tau))
    return make_error(ErrorCode::kInvalidArgument, "centered_clipping: tau must be finite and > 0");
  return check(n, options_.f);
}

std::string CenteredClipping::spec() const {
  return detail::with_threads("centered_clipping:f=" + std::to_string(options_.f) +
                                  ",iterations=" + std::to_string(options_.iterations) +
                                  ",start=" + (options_.start == ClippingStart::kMedian ? "median" : "zero") +
                                  ",tau=" + format_number(options_.tau),
                              options_.threads);
}

namespace {

// One iteration straight on the vectors: ‖x_i − v₀‖ for each row, then
// v₁ = (1 − Σc_i/m)·v₀ + Σ (c_i/m)·x_i — at most two reads, where the Gram product alone costs
// O(n²·d). A row whose squared distance is not finite or overflows float is left out, like a
// row that is not usable on the Gram matrix.
Result<AggregationResult> one_iteration(const InputMatrix& inputs, const std::vector<float>& center, double tau,
                                        std::size_t threads) {
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& kern = detail::isa_kernels();
  const auto squared_distance = [&](std::size_t i) {
    return center.empty() ? kern.squared_norm(inputs.row(i), d)
                          : kern.squared_distance(inputs.row(i), center.data(), d);
  };
  const auto clip_of = [tau](double squared) {
    const double norm = std::sqrt(squared);
    return norm > tau ? tau / norm : 1.0;
  };
  const auto finish = [&](AggregationResult& result, double clip_total, double m) {
    const double shrink = 1.0 - clip_total / m;
    if (!center.empty() && shrink != 0.0) kern.axpy(static_cast<float>(shrink), center.data(), result.value.data(), d);
    result.report.iterations = 1;
  };
  if (threads <= 1) {
    // Each row's share of the sum right after its distance, while the row is still in the cache:
    // one read of the inputs from memory instead of two. The coefficients assume every row usable
    // (m = n); a row that is not (non-finite or overflowing) sends the call to the two passes
    // below. The same float operations in the same order as weighted_sum's, so the same bits.
    AggregationResult result;
    result.value.assign(d, 0.0f);
    double clip_total = 0;
    std::size_t i = 0;
    for (; i < n; ++i) {
      const double squared = squared_distance(i);
      if (!(squared <= std::numeric_limits<float>::max())) break;
      const double clip = clip_of(squared);
      clip_total += clip;
      const double coeff = clip / static_cast<double>(n);
      if (coeff != 0.0) kern.axpy(static_cast<float>(coeff), inputs.row(i), result.value.data(), d);
    }
    if (i == n) {
      finish(result, clip_total, static_cast<double>(n));
      return result;
    }
  }
  std::vector<double> squared(n);
  detail::parallel_for(n, threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) squared[i] = squared_distance(i);
  });
  std::vector<std::size_t> usable, non_finite;
  for (std::size_t i = 0; i < n; ++i) {
    if (squared[i] <= std::numeric_limits<float>::max()) {
      usable.push_back(i);
    } else if (!kern.all_finite(inputs.row(i), d)) {
      non_finite.push_back(i);
    }
  }
  if (usable.empty())
    return make_error(ErrorCode::kPrecondition, "centered_clipping: every input is non-finite or overflows");
  const double m = static_cast<double>(usable.size());
  std::vector<double> coeffs(n, 0.0);
  double clip_total = 0;
  for (std::size_t i : usable) {
    const double clip = clip_of(squared[i]);
    coeffs[i] = clip / m;
    clip_total += clip;
  }
  AggregationResult result;
  result.value = detail::weighted_sum(inputs, coeffs, threads);
  finish(result, clip_total, m);
  result.report.excluded = detail::complement(n, usable);
  result.report.non_finite = std::move(non_finite);
  return result;
}

}  // namespace

Result<AggregationResult> CenteredClipping::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& kern = detail::isa_kernels();

  std::vector<float> center = options_.center;
  if (!center.empty()) {
    if (center.size() != d)
      return make_error(ErrorCode::kInvalidArgument, "centered_clipping: center has " + std::to_string(center.size()) +
                                                         " values, inputs have " + std::to_string(d));
    if (!kern.all_finite(center.data(), d))
      return make_error(ErrorCode::kInvalidArgument, "centered_clipping: center is not finite");
  } else if (options_.start == ClippingStart::kMedian) {
    CoordinateMedian median(MedianOptions{0, options_.threads});
    BALLOT_ASSIGN_OR_RETURN(auto start, median.aggregate(inputs));
    center = std::move(start.value);
  }
  if (options_.iterations == 1) return one_iteration(inputs, center, options_.tau, options_.threads);

  detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  const auto& G = dist.gram;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) usable.push_back(i);
  if (usable.empty())
    return make_error(ErrorCode::kPrecondition, "centered_clipping: every input is non-finite or overflows");

  // v = β·v₀ + Σ α_i x_i with p_i = v₀·x_i and c0 = ‖v₀‖² (all zero when v₀ = 0).
  double beta = center.empty() ? 0.0 : 1.0, c0 = 0;
  std::vector<double> p(n, 0.0), alpha(n, 0.0), clip(n, 0.0);
  if (!center.empty()) {
    c0 = kern.squared_norm(center.data(), d);
    detail::parallel_for(usable.size(), options_.threads, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k) p[usable[k]] = kern.dot(center.data(), inputs.row(usable[k]), d);
    });
  }
  const double m = static_cast<double>(usable.size());
  for (std::size_t it = 0; it < options_.iterations; ++it) {
    double v_norm = beta * beta * c0, pa = 0;
    std::vector<double> v_dot(n, 0.0);  // v·x_i
    for (std::size_t i : usable) {
      double s = 0;
      for (std::size_t j : usable) s += G[i * n + j] * alpha[j];
      v_dot[i] = beta * p[i] + s;
      v_norm += alpha[i] * s;
      pa += p[i] * alpha[i];
    }
    v_norm += 2 * beta * pa;
    // Karimireddy et al. eq. (3): each x_i − v is clipped to radius τ, then averaged into v.
    double clip_total = 0;
    for (std::size_t i : usable) {
      const double norm = std::sqrt(std::max(0.0, G[i * n + i] - 2 * v_dot[i] + v_norm));
      clip[i] = norm > options_.tau ? options_.tau / norm : 1.0;
      clip_total += clip[i];
    }
    const double shrink = 1.0 - clip_total / m;
    beta *= shrink;
    for (std::size_t i : usable) alpha[i] = alpha[i] * shrink + clip[i] / m;
  }

  AggregationResult result;
  result.value = detail::weighted_sum(inputs, alpha, options_.threads);
  if (beta != 0.0) kern.axpy(static_cast<float>(beta), center.data(), result.value.data(), d);
  result.report.iterations = options_.iterations;
  result.report.excluded = detail::complement(n, usable);
  result.report.non_finite = std::move(dist.non_finite);
  return result;
}

}  // namespace ballot::robust
