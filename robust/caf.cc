#include "robust/caf.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "robust/detail/common.h"
#include "robust/detail/covariance.h"

namespace ballot::robust {

Status Caf::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "caf needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("caf", "n >= 2f + 1", n, f);
  return {};
}

std::string Caf::spec() const { return detail::with_threads("caf:f=" + std::to_string(options_.f), options_.threads); }

Result<AggregationResult> Caf::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n();
  detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  std::vector<double> weight(n, 0.0);
  std::size_t usable = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) weight[i] = 1.0, ++usable;
  if (usable == 0) return make_error(ErrorCode::kPrecondition, "caf: every input is non-finite or overflows");
  // k unusable inputs are Byzantine ones already removed: the filter runs on the other n − k with
  // f − min(k, f), so it stops once the total weight is at most (n − k) − 2(f − min(k, f)).
  const std::size_t f = options_.f - std::min(options_.f, n - usable);
  const double stop = static_cast<double>(usable - 2 * f);

  std::vector<double> best = weight;  // f = 0: the loop does not run and the output is the mean
  double best_value = std::numeric_limits<double>::infinity();
  std::size_t iterations = 0;
  std::vector<std::size_t> support;
  std::vector<double> support_weight;
  auto total = [&] {
    double s = 0;
    for (double w : weight) s += w;
    return s;
  };
  while (total() > stop) {
    support.clear();
    support_weight.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (weight[i] > 0) support.push_back(i), support_weight.push_back(weight[i]);
    const detail::CovarianceTop top = detail::weighted_covariance_top(dist.gram, n, support, support_weight, true);
    ++iterations;
    // Allouah et al. Algorithm 2, last line: keep the iterate of smallest λ_max (strictly smaller:
    // the first wins ties).
    if (top.value < best_value) best_value = top.value, best = weight;
    // λ = 0: the weighted inputs coincide with μ_c, which no later iterate can improve on.
    double tau_max = 0;
    for (double p : top.projection) tau_max = std::max(tau_max, p * p);
    if (!(top.value > 0) || !(tau_max > 0) || !std::isfinite(tau_max)) break;
    // c_i ← c_i (1 − τ_i / τ_max): the input of largest τ gets weight exactly 0, so the loop ends.
    for (std::size_t a = 0; a < support.size(); ++a) {
      const double tau = top.projection[a] * top.projection[a];
      weight[support[a]] *= 1.0 - tau / tau_max;
    }
  }

  double sum = 0;
  for (double w : best) sum += w;
  std::vector<double> coeffs(n, 0.0);
  AggregationResult result;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(best[i] > 0)) continue;
    coeffs[i] = best[i] / sum;
    result.report.selected.push_back(i);
  }
  result.value = detail::weighted_sum(inputs, coeffs, options_.threads);
  result.report.scores = std::move(best);
  result.report.iterations = iterations;
  result.report.excluded = detail::complement(n, result.report.selected);
  result.report.non_finite = std::move(dist.non_finite);
  return result;
}

}  // namespace ballot::robust
