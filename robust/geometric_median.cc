#include "robust/geometric_median.h"

#include <algorithm>
#include <cmath>

#include "robust/detail/common.h"

namespace ballot::robust {

Status GeometricMedian::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "geometric_median needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("geometric_median", "n >= 2f + 1", n, f);
  return {};
}

Status GeometricMedian::check(std::size_t n) const {
  if (!(options_.nu > 0) || !std::isfinite(options_.nu))
    return make_error(ErrorCode::kInvalidArgument, "geometric_median: nu must be finite and > 0");
  if (!std::isfinite(options_.tolerance))
    return make_error(ErrorCode::kInvalidArgument, "geometric_median: tolerance must be finite");
  return check(n, options_.f);
}

std::string GeometricMedian::spec() const {
  return detail::with_threads("geometric_median:f=" + std::to_string(options_.f) +
                                  (options_.start == WeiszfeldStart::kZero ? ",start=zero" : "") + ",max_iterations=" +
                                  std::to_string(options_.max_iterations) + ",nu=" + format_number(options_.nu) +
                                  ",tolerance=" + format_number(options_.tolerance),
                              options_.threads);
}

Result<AggregationResult> GeometricMedian::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n();
  detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  const auto& G = dist.gram;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) usable.push_back(i);
  if (usable.empty())
    return make_error(ErrorCode::kPrecondition, "geometric_median: every input is non-finite or overflows");

  // α: the current iterate v = Σ α_i x_i; start at the mean of the usable inputs (or at 0: α = 0).
  std::vector<double> alpha(n, 0.0), g_alpha(n), distance(n), weight(n, 0.0);
  if (options_.start == WeiszfeldStart::kMean)
    for (std::size_t i : usable) alpha[i] = 1.0 / static_cast<double>(usable.size());
  auto evaluate = [&]() {  // distances ‖v − x_i‖ from the Gram matrix; returns Σ_i ‖v − x_i‖
    double v_norm = 0;
    for (std::size_t i : usable) {
      double s = 0;
      for (std::size_t j : usable) s += G[i * n + j] * alpha[j];
      g_alpha[i] = s;
      v_norm += alpha[i] * s;
    }
    double objective = 0;
    for (std::size_t i : usable) {
      distance[i] = std::sqrt(std::max(0.0, v_norm - 2 * g_alpha[i] + G[i * n + i]));
      objective += distance[i];
    }
    return objective;
  };
  double objective = evaluate();
  std::size_t iterations = 0;
  while (iterations < options_.max_iterations) {
    // Smoothed Weiszfeld step (RFA Algorithm 3): β_i = 1 / max(ν, ‖v − x_i‖).
    double total = 0;
    for (std::size_t i : usable) {
      weight[i] = 1.0 / std::max(options_.nu, distance[i]);
      total += weight[i];
    }
    for (std::size_t i : usable) alpha[i] = weight[i] / total;
    ++iterations;
    const double previous = objective;
    objective = evaluate();
    if (options_.tolerance >= 0 && !(previous - objective > options_.tolerance * objective)) break;
  }

  AggregationResult result;
  result.value = detail::weighted_sum(inputs, alpha, options_.threads);
  result.report.iterations = iterations;
  result.report.scores = alpha;
  result.report.excluded = detail::complement(n, usable);
  result.report.non_finite = std::move(dist.non_finite);
  return result;
}

}  // namespace ballot::robust
