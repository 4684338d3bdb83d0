#include "robust/krum.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "robust/detail/common.h"

namespace ballot::robust {
namespace {

// Scores of all inputs, and the inputs ordered by (score, index) with unusable ones last.
struct Ranking {
  detail::Distances distances;
  std::vector<double> scores;
  std::vector<std::size_t> order;
  std::size_t finite = 0;  // inputs with a finite score
};

Ranking rank_inputs(const InputMatrix& inputs, std::size_t f, std::size_t threads) {
  Ranking r;
  r.distances = detail::pairwise_distances(inputs, threads);
  std::vector<std::size_t> all(inputs.n());
  std::iota(all.begin(), all.end(), 0);
  r.scores = detail::krum_scores(r.distances, all, f);
  r.order = all;
  std::stable_sort(r.order.begin(), r.order.end(), [&](std::size_t a, std::size_t b) {
    return r.scores[a] < r.scores[b];  // +∞ sorts last; NaN never occurs (scores are sums of ≥ 0)
  });
  for (double s : r.scores) r.finite += std::isfinite(s) ? 1 : 0;
  return r;
}

Error no_finite_score(const char* rule, std::size_t need, std::size_t have) {
  return make_error(ErrorCode::kPrecondition, std::string(rule) + ": " + std::to_string(need) +
                                                  " inputs with a finite score needed, " + std::to_string(have) +
                                                  " found (too many non-finite or overflowing inputs)");
}

AggregationResult selection_result(const InputMatrix& inputs, Ranking& r, std::vector<std::size_t> selected,
                                   std::size_t threads) {
  std::sort(selected.begin(), selected.end());
  AggregationResult result;
  if (selected.size() == 1) {
    const auto row = inputs.row_span(selected[0]);
    result.value.assign(row.begin(), row.end());
  } else {
    std::vector<double> coeffs(inputs.n(), 0.0);
    for (std::size_t i : selected) coeffs[i] = 1.0 / static_cast<double>(selected.size());
    result.value = detail::weighted_sum(inputs, coeffs, threads);
  }
  std::vector<std::size_t> excluded = detail::complement(inputs.n(), selected);
  result.report.selected = std::move(selected);
  result.report.excluded = std::move(excluded);
  result.report.non_finite = std::move(r.distances.non_finite);
  result.report.scores = std::move(r.scores);
  return result;
}

}  // namespace

Status Krum::check(std::size_t n, std::size_t f) {
  if (n < 2 * f + 3) return detail::precondition_error("krum", "n >= 2f + 3", n, f);
  return {};
}
std::string Krum::spec() const {
  return detail::with_threads("krum:f=" + std::to_string(options_.f), options_.threads);
}
Result<AggregationResult> Krum::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  Ranking r = rank_inputs(inputs, options_.f, options_.threads);
  if (r.finite == 0) return no_finite_score("krum", 1, 0);
  return selection_result(inputs, r, {r.order[0]}, options_.threads);
}

Status MultiKrum::check(std::size_t n, std::size_t f, std::size_t m) {
  if (n < 2 * f + 3) return detail::precondition_error("multi_krum", "n >= 2f + 3", n, f);
  if (m > n)
    return make_error(ErrorCode::kPrecondition,
                      "multi_krum: m = " + std::to_string(m) + " exceeds n = " + std::to_string(n));
  return {};
}
std::string MultiKrum::spec() const {
  return detail::with_threads("multi_krum:f=" + std::to_string(options_.f) + ",m=" + std::to_string(options_.m),
                              options_.threads);
}
Result<AggregationResult> MultiKrum::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t m = options_.m == 0 ? inputs.n() - options_.f : options_.m;
  Ranking r = rank_inputs(inputs, options_.f, options_.threads);
  if (r.finite < m) return no_finite_score("multi_krum", m, r.finite);
  return selection_result(inputs, r,
                          std::vector<std::size_t>(r.order.begin(), r.order.begin() + static_cast<std::ptrdiff_t>(m)),
                          options_.threads);
}

}  // namespace ballot::robust
