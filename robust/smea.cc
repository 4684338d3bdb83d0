#include "robust/smea.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "robust/detail/common.h"
#include "robust/detail/covariance.h"

namespace ballot::robust {
namespace {

// Exact binomials C(a, b) for a ≤ m, saturating at 2^63 (only counts ≤ C(m, s) ≤ 2^53 are used).
std::vector<std::uint64_t> pascal(std::size_t m) {
  constexpr std::uint64_t kCap = std::uint64_t{1} << 63;
  std::vector<std::uint64_t> c((m + 1) * (m + 1), 0);
  for (std::size_t a = 0; a <= m; ++a) {
    c[a * (m + 1)] = 1;
    for (std::size_t b = 1; b <= a; ++b)
      c[a * (m + 1) + b] = std::min(kCap, c[(a - 1) * (m + 1) + b - 1] + c[(a - 1) * (m + 1) + b]);
  }
  return c;
}

// The subset of rank r, in lexicographic order, of the s-subsets of {0, …, m − 1}.
std::vector<std::size_t> unrank(std::uint64_t r, std::size_t m, std::size_t s, const std::vector<std::uint64_t>& c) {
  std::vector<std::size_t> out;
  std::size_t x = 0;
  for (std::size_t p = 0; p < s; ++p) {
    while (true) {
      const std::uint64_t starting_here = c[(m - x - 1) * (m + 1) + (s - p - 1)];
      if (r < starting_here) break;
      r -= starting_here;
      ++x;
    }
    out.push_back(x++);
  }
  return out;
}

// The next s-subset in lexicographic order; false after the last.
bool next_subset(std::vector<std::size_t>& subset, std::size_t m) {
  const std::size_t s = subset.size();
  std::size_t p = s;
  while (p > 0 && subset[p - 1] == m - s + p - 1) --p;
  if (p == 0) return false;
  ++subset[p - 1];
  for (std::size_t q = p; q < s; ++q) subset[q] = subset[q - 1] + 1;
  return true;
}

}  // namespace

Status Smea::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "smea needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("smea", "n >= 2f + 1", n, f);
  return {};
}

Status Smea::check(std::size_t n) const {
  if (!(options_.max_subsets >= 1)) return make_error(ErrorCode::kInvalidArgument, "smea: max_subsets must be >= 1");
  return check(n, options_.f);
}

std::string Smea::spec() const {
  return detail::with_threads(
      "smea:f=" + std::to_string(options_.f) + ",max_subsets=" + format_number(options_.max_subsets), options_.threads);
}

Result<AggregationResult> Smea::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n();
  // Refuse before the O(n²·d) Gram product when even the all-finite case is too large; beyond 2^53
  // subsets could not be counted exactly anyway.
  const double worst = detail::binomial(n, options_.f);
  if (worst > options_.max_subsets || worst > 0x1p53)
    return make_error(ErrorCode::kLimitExceeded, "smea: C(" + std::to_string(n) + ", " + std::to_string(options_.f) +
                                                     ") = " + format_number(worst) + " subsets exceed max_subsets = " +
                                                     format_number(options_.max_subsets) +
                                                     "; use a smaller f or another rule");
  detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  std::vector<std::size_t> pool;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) pool.push_back(i);
  if (pool.empty()) return make_error(ErrorCode::kPrecondition, "smea: every input is non-finite or overflows");
  // k unusable inputs are Byzantine: choose n − f among the others, or all of them when k > f.
  const std::size_t m = pool.size();
  const std::size_t size = m - (options_.f - std::min(options_.f, n - m));
  const auto count = static_cast<std::uint64_t>(detail::binomial(m, size));
  const std::vector<std::uint64_t> c = pascal(m);

  // Each part scans a contiguous range of subset ranks; the lowest rank wins ties within a part
  // and across parts, so the choice does not depend on the number of parts.
  struct Best {
    double value = std::numeric_limits<double>::infinity();
    std::uint64_t rank = 0;
    std::vector<std::size_t> subset;
  };
  const std::size_t parts =
      static_cast<std::size_t>(std::min<std::uint64_t>(count, std::max<std::size_t>(1, options_.threads)));
  std::vector<Best> found(parts);
  const std::vector<double> unit(size, 1.0);
  detail::parallel_for(parts, options_.threads, [&](std::size_t part_begin, std::size_t part_end) {
    std::vector<std::size_t> rows(size);
    for (std::size_t part = part_begin; part < part_end; ++part) {
      const std::uint64_t first = count * part / parts, last = count * (part + 1) / parts;
      std::vector<std::size_t> subset = unrank(first, m, size, c);
      for (std::uint64_t rank = first; rank < last; ++rank) {
        for (std::size_t a = 0; a < size; ++a) rows[a] = pool[subset[a]];
        // Allouah et al. 2023 (SMEA): S* ∈ argmin_{|S| = n − f} λ_max(Σ_S), the first on ties.
        const double value = detail::weighted_covariance_top(dist.gram, n, rows, unit, false).value;
        if (value < found[part].value) found[part] = {value, rank, rows};
        next_subset(subset, m);
      }
    }
  });
  Best best;
  for (auto& part : found)
    if (part.value < best.value) best = std::move(part);
  if (best.subset.empty()) return make_error(ErrorCode::kInternal, "smea: no subset has a finite eigenvalue");

  std::vector<double> coeffs(n, 0.0);
  for (std::size_t i : best.subset) coeffs[i] = 1.0 / static_cast<double>(size);
  AggregationResult result;
  result.value = detail::weighted_sum(inputs, coeffs, options_.threads);
  result.report.scores = {best.value};
  result.report.excluded = detail::complement(n, best.subset);
  result.report.selected = std::move(best.subset);
  result.report.non_finite = std::move(dist.non_finite);
  return result;
}

}  // namespace ballot::robust
