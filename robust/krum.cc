#include "robust/krum.h"

#include <string>
#include <vector>

#include "robust/detail/common.h"

namespace ballot::robust {
namespace {

// The rule's value from its report: the selected row itself, or the mean of the selected rows.
AggregationResult selection_result(const InputMatrix& inputs, AggregationReport report, std::size_t threads) {
  AggregationResult result;
  const auto& selected = report.selected;
  if (selected.size() == 1) {
    const auto row = inputs.row_span(selected[0]);
    result.value.assign(row.begin(), row.end());
  } else {
    std::vector<double> coeffs(inputs.n(), 0.0);
    for (std::size_t i : selected) coeffs[i] = 1.0 / static_cast<double>(selected.size());
    result.value = detail::weighted_sum(inputs, coeffs, threads);
  }
  result.report = std::move(report);
  return result;
}

}  // namespace

Status Krum::check(std::size_t n, std::size_t f) {
  if (!detail::at_least(n, 2, f, 3)) return detail::precondition_error("krum", "n >= 2f + 3", n, f);
  return {};
}
std::string Krum::spec() const {
  return detail::with_threads("krum:f=" + std::to_string(options_.f), options_.threads);
}
Result<AggregationResult> Krum::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  BALLOT_ASSIGN_OR_RETURN(
      auto report, detail::krum_selection(detail::pairwise_distances(inputs, options_.threads), options_.f, 1, "krum"));
  return selection_result(inputs, std::move(report), options_.threads);
}

Status MultiKrum::check(std::size_t n, std::size_t f, std::size_t m) {
  if (!detail::at_least(n, 2, f, 3)) return detail::precondition_error("multi_krum", "n >= 2f + 3", n, f);
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
  BALLOT_ASSIGN_OR_RETURN(auto report, detail::krum_selection(detail::pairwise_distances(inputs, options_.threads),
                                                              options_.f, m, "multi_krum"));
  return selection_result(inputs, std::move(report), options_.threads);
}

}  // namespace ballot::robust
