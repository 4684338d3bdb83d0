#include "robust/mda.h"

#include <cmath>
#include <limits>

#include "robust/detail/common.h"

namespace ballot::robust {
namespace {

// Depth-first enumeration of the subsets of `size` among `pool`, in lexicographic order, pruned
// when the partial subset's diameter is already no smaller than the best one (ties keep the first).
struct Search {
  const detail::Distances& dist;
  const std::vector<std::size_t>& pool;
  std::size_t size;
  std::vector<std::size_t> current, best;
  double best_diameter = std::numeric_limits<double>::infinity();

  void run(std::size_t next, double diameter) {
    if (current.size() == size) {
      if (diameter < best_diameter) {
        best_diameter = diameter;
        best = current;
      }
      return;
    }
    for (std::size_t k = next; k + (size - current.size()) <= pool.size(); ++k) {
      double grown = diameter;
      for (std::size_t member : current) grown = std::max(grown, dist.at(member, pool[k]));
      if (grown >= best_diameter) continue;
      current.push_back(pool[k]);
      run(k + 1, grown);
      current.pop_back();
    }
  }
};

}  // namespace

Status MinimumDiameterAveraging::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "mda needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("mda", "n >= 2f + 1", n, f);
  return {};
}

Status MinimumDiameterAveraging::check(std::size_t n) const {
  if (!(options_.max_subsets >= 1)) return make_error(ErrorCode::kInvalidArgument, "mda: max_subsets must be >= 1");
  return check(n, options_.f);
}

std::string MinimumDiameterAveraging::spec() const {
  return detail::with_threads(
      "mda:f=" + std::to_string(options_.f) + ",max_subsets=" + format_number(options_.max_subsets), options_.threads);
}

Result<AggregationResult> MinimumDiameterAveraging::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n();
  // Refuse before the O(n²·d) distance product when even the all-finite case is too large.
  const double worst = detail::binomial(n, options_.f);
  if (worst > options_.max_subsets)
    return make_error(ErrorCode::kLimitExceeded, "mda: C(" + std::to_string(n) + ", " + std::to_string(options_.f) +
                                                     ") = " + format_number(worst) + " subsets exceed max_subsets = " +
                                                     format_number(options_.max_subsets) +
                                                     "; use a smaller f or another rule");
  detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  std::vector<std::size_t> pool;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) pool.push_back(i);
  if (pool.empty()) return make_error(ErrorCode::kPrecondition, "mda: every input is non-finite or overflows");
  // k unusable inputs are Byzantine: choose n − f among the others, or all of them when k > f.
  const std::size_t removed = n - pool.size();
  const std::size_t size = pool.size() - (options_.f - std::min(options_.f, removed));

  Search search{dist, pool, size, {}, {}};
  search.run(0, 0.0);
  std::vector<double> coeffs(n, 0.0);
  for (std::size_t i : search.best) coeffs[i] = 1.0 / static_cast<double>(size);

  AggregationResult result;
  result.value = detail::weighted_sum(inputs, coeffs, options_.threads);
  result.report.scores = {search.best_diameter};
  result.report.excluded = detail::complement(n, search.best);
  result.report.selected = std::move(search.best);
  result.report.non_finite = std::move(dist.non_finite);
  return result;
}

}  // namespace ballot::robust
