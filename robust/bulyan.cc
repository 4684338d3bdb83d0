#include "robust/bulyan.h"

#include <algorithm>

#include "robust/detail/common.h"

namespace ballot::robust {

Status Bulyan::check(std::size_t n, std::size_t f) {
  if (!detail::at_least(n, 4, f, 3)) return detail::precondition_error("bulyan", "n >= 4f + 3", n, f);
  return {};
}

std::string Bulyan::spec() const {
  return detail::with_threads("bulyan:f=" + std::to_string(options_.f), options_.threads);
}

Result<AggregationResult> Bulyan::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), f = options_.f;
  const std::size_t theta = n - 2 * f, beta = theta - 2 * f;
  detail::Distances distances = detail::pairwise_distances(inputs, options_.threads);

  std::vector<std::size_t> remaining(n), selected;
  for (std::size_t i = 0; i < n; ++i) remaining[i] = i;
  while (selected.size() < theta) {
    const auto scores = detail::krum_scores(distances, remaining, f);
    const std::size_t best = detail::argmin_finite(scores);
    if (best == static_cast<std::size_t>(-1))
      return make_error(ErrorCode::kPrecondition, "bulyan: only " + std::to_string(selected.size()) +
                                                      " usable inputs, theta = n - 2f = " + std::to_string(theta) +
                                                      " needed (too many non-finite or overflowing inputs)");
    selected.push_back(remaining[best]);
    remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(best));
  }
  std::sort(selected.begin(), selected.end());

  auto plan = [beta](std::size_t, std::size_t) -> Result<detail::CoordinatePlan> {
    return detail::CoordinatePlan{detail::CoordinateOp::kClosestWindow, 0, beta};
  };
  BALLOT_ASSIGN_OR_RETURN(auto outcome, detail::coordinate_wise(inputs.subset(selected), options_.threads, plan));
  AggregationResult result;
  result.value = std::move(outcome.value);
  result.report.excluded = detail::complement(n, selected);
  result.report.selected = std::move(selected);
  result.report.non_finite = std::move(distances.non_finite);
  return result;
}

}  // namespace ballot::robust
