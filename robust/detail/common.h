// Internal building blocks shared by the rules: threading, the finiteness scan, pairwise
// distances through one Gram matrix product, the tiled coordinate-wise engine and weighted sums.
// Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/spec.h"
#include "robust/aggregator.h"
#include "robust/detail/isa_kernels.h"

namespace ballot::robust::detail {

// Runs fn(begin, end) over [0, count) split into at most `threads` contiguous chunks (the calling
// thread takes the first). Results must not depend on the split (each index is independent). A
// thread that cannot start leaves its chunks to the calling thread; an exception from fn is
// rethrown once every chunk has run.
void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& fn);

// Indices of the rows holding a NaN or ±Inf, ascending. One read of the input.
std::vector<std::size_t> non_finite_rows(const InputMatrix& inputs, std::size_t threads);

// The complement of `excluded` (ascending) in [0, n).
std::vector<std::size_t> complement(std::size_t n, const std::vector<std::size_t>& excluded);

// Squared Euclidean distances between all rows from one Gram matrix product
// (‖x‖² + ‖y‖² − 2x·y). Rows whose squared norm is not finite (non-finite coordinates, or so huge
// that it overflows) are at +∞ from every row, themselves included.
struct Distances {
  std::size_t n = 0;
  std::vector<double> squared;          // n×n, symmetric, 0 on the diagonal of usable rows
  std::vector<double> gram;             // n×n Gram matrix (x_i·x_j), as accumulated
  std::vector<std::uint8_t> usable;     // 1 when the row's distances are finite
  std::vector<std::size_t> non_finite;  // rows with a NaN/±Inf coordinate, ascending
  double at(std::size_t i, std::size_t j) const { return squared[i * n + j]; }
};
Distances pairwise_distances(const InputMatrix& inputs, std::size_t threads);
// The rest of pairwise_distances from a Gram matrix however it was computed (robust/cuda: on a
// GPU): `gram` is n×n with its lower triangle (i ≥ j at i·n + j) filled; it is made symmetric.
// `has_non_finite(i)` is asked only for rows whose squared norm is not finite.
Distances distances_from_gram(std::vector<double> gram, std::size_t n,
                              const std::function<bool(std::size_t)>& has_non_finite);

// Krum scores (Blanchard et al., NeurIPS 2017, eq. in §4): for each candidate i, the sum of the
// squared distances to its max(0, |candidates| − f − 2) nearest other candidates; +∞ when one of
// them is at +∞. Returned in the order of `candidates`.
std::vector<double> krum_scores(const Distances& distances, const std::vector<std::size_t>& candidates, std::size_t f);
// Krum's choice (m = 1) and multi-Krum's from the distances: the m inputs of lowest score (ties:
// the lower index), with the report (selected ascending, excluded, non_finite, scores). The value
// is the caller's: the selected row, or the mean of the selected rows (weighted_sum, 1/m each).
// kPrecondition naming `rule` when fewer than m inputs have a finite score.
Result<AggregationReport> krum_selection(Distances distances, std::size_t f, std::size_t m, const std::string& rule);
// The position in `scores` of the smallest finite score (the lowest on ties), or npos.
std::size_t argmin_finite(const std::vector<double>& scores);

// Σ_i coeffs[i]·x_i, skipping rows whose coefficient is exactly 0 (so a non-finite row with a zero
// coefficient never poisons the sum).
std::vector<float> weighted_sum(const InputMatrix& inputs, const std::vector<double>& coeffs, std::size_t threads);

// The coordinate-wise engine. Rows are copied tile by tile (a column block of every row, then
// kTile-wide tiles of it in L1) and each tile is reduced per column:
//   kMean:          mean of all rows
//   kMedian:        median (mean of the two middle values for an even count)
//   kTrimmedMean:   mean after dropping the `trim` smallest and `trim` largest values
//   kClosestWindow: mean of the `window` values closest to the median
// Order statistics come from a selection network (Batcher's odd–even merge network pruned to the
// ranks needed) run with SIMD lanes as coordinates: no branches, no transpose, no comparison sort.
// Above kNetworkMaxRows rows a per-column std::nth_element over the transposed tile is used.
// Non-finite rows are detected while copying; `plan` maps the number of finite rows m (and the
// number k of non-finite ones) to the parameters, since a rule's trimming shrinks with k.
enum class CoordinateOp { kMean, kMedian, kTrimmedMean, kClosestWindow };
struct CoordinatePlan {
  CoordinateOp op = CoordinateOp::kMean;
  std::size_t trim = 0;    // kTrimmedMean
  std::size_t window = 0;  // kClosestWindow
};
inline constexpr std::size_t kNetworkMaxRows = 128;
struct CoordinateOutcome {
  std::vector<float> value;
  std::vector<std::size_t> non_finite;
};
// row_weights (the mean only; empty: none): input i counts as the floats (float)(row_weights[i] · x_i),
// as IsaKernels::mean_rows weights them; its finiteness is x_i's (row_weights are finite).
Result<CoordinateOutcome> coordinate_wise(
    const InputMatrix& inputs, std::size_t threads,
    const std::function<Result<CoordinatePlan>(std::size_t m, std::size_t k)>& plan,
    std::span<const float> row_weights = {});

// Batcher's odd–even merge sorting network on m wires, restricted to the comparators that the
// output ranks [need_lo, need_hi) depend on.
std::vector<Comparator> selection_network(std::size_t m, std::size_t need_lo, std::size_t need_hi);

// The same network as run by the engine: first the groups of 16 wires ([16g, 16g + 16), the last
// one cut at m) are sorted in registers (IsaKernels::sort_groups16 on sorted_wires = m wires), then
// `comparators` are applied in order. The needed ranks come out bit-identical to
// selection_network's.
struct SelectionPlan {
  std::size_t sorted_wires = 0;
  std::vector<Comparator> comparators;
};
SelectionPlan selection_plan(std::size_t m, std::size_t need_lo, std::size_t need_hi);

// The ranks the closest-window reduction (CoordinateOp::kClosestWindow, w of m values) needs
// sorted, [need_lo, need_hi), and the window starts it scans, [first, last]. The window of the w
// values closest to the median holds a middle rank, so only starts near the middle are scanned;
// a lower start can win only on an exact tie x[first − 1] == x[first], which the engine detects
// (need_lo = first − 1 then) and resolves by a full sort of that column.
struct WindowRanks {
  std::size_t need_lo = 0, need_hi = 0, first = 0, last = 0;
};
WindowRanks window_ranks(std::size_t m, std::size_t w);

// "name:opts" plus ",threads=N" (or ":threads=N") when threads != 1.
std::string with_threads(std::string spec, std::size_t threads);

// C(n, k) in double (exact up to 2^53, +∞ beyond the range of double): the subset counts of the
// rules that enumerate subsets (MDA, SMEA), checked against their max_subsets before any work.
double binomial(std::size_t n, std::size_t k);

// Shared error text.
Error precondition_error(const std::string& rule, const std::string& bound, std::size_t n, std::size_t f);
// n >= k·f + c, without overflow for any f (an option read from a spec may be huge).
constexpr bool at_least(std::size_t n, std::size_t k, std::size_t f, std::size_t c) {
  return n >= c && (n - c) / k >= f;
}
Status check_not_empty(const InputMatrix& inputs);

}  // namespace ballot::robust::detail
