#include "robust/monna.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "robust/detail/common.h"

namespace ballot::robust {

Status Monna::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "monna needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("monna", "n >= 2f + 1", n, f);
  return {};
}

Status Monna::check(std::size_t n) const {
  BALLOT_TRY(check(n, options_.f));
  if (options_.pivot >= n)
    return make_error(ErrorCode::kPrecondition, "monna needs pivot < n (n = " + std::to_string(n) +
                                                    ", pivot = " + std::to_string(options_.pivot) + ")");
  return {};
}

std::string Monna::spec() const {
  return detail::with_threads("monna:f=" + std::to_string(options_.f) + ",pivot=" + std::to_string(options_.pivot),
                              options_.threads);
}

Result<AggregationResult> Monna::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d(), p = options_.pivot;
  const auto& kern = detail::isa_kernels();
  // Like the rules on the Gram matrix, an input whose squared norm overflows float (or is not finite)
  // is at +∞ from everything.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto usable_norm = [](double squared) { return squared <= std::numeric_limits<float>::max(); };
  const double pivot_norm = kern.squared_norm(inputs.row(p), d);
  if (!usable_norm(pivot_norm))
    return make_error(ErrorCode::kPrecondition,
                      "monna: the pivot (input " + std::to_string(p) + ") is non-finite or overflows");

  std::vector<double> distance(n, kInf);
  std::vector<std::uint8_t> bad(n, 0);
  detail::parallel_for(n, options_.threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const double norm = kern.squared_norm(inputs.row(i), d);
      if (!usable_norm(norm)) {
        bad[i] = !kern.all_finite(inputs.row(i), d);
        continue;
      }
      // ‖x_i − x_p‖² directly (one read of both, as ‖x_i‖² + ‖x_p‖² − 2⟨x_i, x_p⟩ would be), exact
      // where that form cancels: inputs far from the origin compared with their spread.
      distance[i] = i == p ? 0.0 : kern.squared_distance(inputs.row(i), inputs.row(p), d);
    }
  });
  std::vector<std::size_t> usable, non_finite;
  for (std::size_t i = 0; i < n; ++i) {
    if (distance[i] < kInf) usable.push_back(i);
    if (bad[i]) non_finite.push_back(i);
  }

  // Farhadkhani et al. (NNA): N_p is the set of the n − f inputs nearest to x_p; with k non-finite
  // inputs, n − k usable ones and f − min(k, f) Byzantine among them.
  const std::size_t k = std::min(usable.size(), n - options_.f);
  std::vector<std::size_t> order = usable;
  // The pivot first (itself included whatever ties at distance 0), then by distance, ties to the
  // lower index.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (a == p || b == p) return a == p && b != p;
    return distance[a] < distance[b];
  });
  order.resize(k);
  std::sort(order.begin(), order.end());

  std::vector<double> coeffs(n, 0.0);
  for (std::size_t i : order) coeffs[i] = 1.0 / static_cast<double>(k);
  AggregationResult result;
  result.value = detail::weighted_sum(inputs, coeffs, options_.threads);
  result.report.scores = std::move(distance);
  result.report.excluded = detail::complement(n, order);
  result.report.selected = std::move(order);
  result.report.non_finite = std::move(non_finite);
  return result;
}

}  // namespace ballot::robust
