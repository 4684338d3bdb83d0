#include "robust/coordinate_wise.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "robust/detail/common.h"

namespace ballot::robust {
namespace {

using detail::CoordinateOp;
using detail::CoordinatePlan;

// Runs the coordinate engine; k non-finite inputs count against f (Byzantine by definition).
Result<AggregationResult> run(const InputMatrix& inputs, std::size_t threads, CoordinateOp op, std::size_t f,
                              std::span<const float> row_weights = {}) {
  auto plan = [op, f](std::size_t m, std::size_t k) -> Result<CoordinatePlan> {
    const std::size_t remaining = f - std::min(f, k);
    CoordinatePlan plan;
    plan.op = op;
    plan.trim = op == CoordinateOp::kTrimmedMean ? remaining : 0;
    plan.window = op == CoordinateOp::kClosestWindow ? m - remaining : 0;
    return plan;
  };
  BALLOT_ASSIGN_OR_RETURN(auto outcome, detail::coordinate_wise(inputs, threads, plan, row_weights));
  AggregationResult result;
  result.value = std::move(outcome.value);
  result.report.excluded = outcome.non_finite;
  result.report.non_finite = std::move(outcome.non_finite);
  return result;
}

Status check_honest_majority(const char* rule, std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, std::string(rule) + " needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error(rule, "n >= 2f + 1", n, f);
  return {};
}

}  // namespace

Status Mean::check(std::size_t n, std::size_t) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "mean needs at least one input");
  return {};
}
std::string Mean::spec() const { return detail::with_threads("mean", options_.threads); }
Result<AggregationResult> Mean::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  // The mean has no f: a non-finite input is excluded rather than allowed to poison every
  // coordinate, and the mean of the others is returned.
  return run(inputs, options_.threads, CoordinateOp::kMean, 0);
}
Result<AggregationResult> Mean::aggregate_scaled(const InputMatrix& inputs, std::span<const float> scales) {
  BALLOT_TRY(check(inputs.n()));
  if (scales.size() != inputs.n()) {
    return make_error(ErrorCode::kInvalidArgument, "mean: " + std::to_string(scales.size()) + " row scales for " +
                                                       std::to_string(inputs.n()) + " inputs");
  }
  for (const float scale : scales) {
    if (!(std::fabs(scale) <= 1.0f)) {
      return make_error(ErrorCode::kInvalidArgument, "mean: a row scale is outside [-1, 1] (or NaN)");
    }
  }
  return run(inputs, options_.threads, CoordinateOp::kMean, 0, scales);
}

Status CoordinateMedian::check(std::size_t n, std::size_t f) { return check_honest_majority("median", n, f); }
std::string CoordinateMedian::spec() const {
  return detail::with_threads("median:f=" + std::to_string(options_.f), options_.threads);
}
Result<AggregationResult> CoordinateMedian::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  return run(inputs, options_.threads, CoordinateOp::kMedian, options_.f);
}

Status TrimmedMean::check(std::size_t n, std::size_t f) { return check_honest_majority("trimmed_mean", n, f); }
std::string TrimmedMean::spec() const {
  return detail::with_threads("trimmed_mean:f=" + std::to_string(options_.f), options_.threads);
}
Result<AggregationResult> TrimmedMean::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  return run(inputs, options_.threads, CoordinateOp::kTrimmedMean, options_.f);
}

Status MeanAroundMedian::check(std::size_t n, std::size_t f) { return check_honest_majority("meamed", n, f); }
std::string MeanAroundMedian::spec() const {
  return detail::with_threads("meamed:f=" + std::to_string(options_.f), options_.threads);
}
Result<AggregationResult> MeanAroundMedian::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  return run(inputs, options_.threads, CoordinateOp::kClosestWindow, options_.f);
}

}  // namespace ballot::robust
