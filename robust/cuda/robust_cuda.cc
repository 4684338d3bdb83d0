// Host side of the coordinate-wise kernels (compiled by the host compiler; see launch.h).
#include "robust/cuda/robust_cuda.h"

#include <cuda_runtime_api.h>

#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/detail/device_buffer.h"
#include "robust/coordinate_wise.h"
#include "robust/cuda/detail/coordinate_logic.h"
#include "robust/cuda/detail/launch.h"

namespace ballot::robust::cuda {
namespace {

static_assert(kMaxInputs == static_cast<std::size_t>(kMaxRows));

using kernels::cuda::cuda_status;
using kernels::cuda::require_device;

CoordinateOp op_of(CoordinateRule rule) {
  switch (rule) {
    case CoordinateRule::kMean:
      return CoordinateOp::kMean;
    case CoordinateRule::kMedian:
      return CoordinateOp::kMedian;
    case CoordinateRule::kTrimmedMean:
      return CoordinateOp::kTrimmedMean;
    case CoordinateRule::kMeanAroundMedian:
      return CoordinateOp::kClosestWindow;
  }
  return CoordinateOp::kMean;
}

using kernels::cuda::detail::DeviceBuffer;

}  // namespace

Status check(CoordinateRule rule, std::size_t n, std::size_t f) {
  switch (rule) {
    case CoordinateRule::kMean:
      BALLOT_TRY(Mean::check(n, f));
      break;
    case CoordinateRule::kMedian:
      BALLOT_TRY(CoordinateMedian::check(n, f));
      break;
    case CoordinateRule::kTrimmedMean:
      BALLOT_TRY(TrimmedMean::check(n, f));
      break;
    case CoordinateRule::kMeanAroundMedian:
      BALLOT_TRY(MeanAroundMedian::check(n, f));
      break;
    default:
      return make_error(ErrorCode::kInvalidArgument, "unknown coordinate-wise rule");
  }
  if (n > kMaxInputs) {
    return make_error(ErrorCode::kInvalidArgument, "the CUDA coordinate-wise rules take at most " +
                                                       std::to_string(kMaxInputs) +
                                                       " inputs (n = " + std::to_string(n) + "); use the CPU rule");
  }
  return {};
}

Status coordinate_wise(CoordinateRule rule, std::size_t f, const float* d_inputs, std::size_t n, std::size_t d,
                       float* d_out, std::uint64_t* d_non_finite, void* stream) {
  BALLOT_TRY(check(rule, n, f));
  if (d_non_finite == nullptr) {
    return make_error(ErrorCode::kInvalidArgument, "coordinate_wise needs a device word for the non-finite rows");
  }
  if (d != 0 && (d_inputs == nullptr || d_out == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "coordinate_wise needs input and output buffers when d > 0");
  }
  if (d > std::numeric_limits<std::size_t>::max() / sizeof(float) / n) {
    return make_error(ErrorCode::kInvalidArgument, "coordinate_wise: n·d floats overflow the address space");
  }
  // The mean has no f (the CPU rule runs with 0); for the others f < n ≤ 64 after check.
  const int rule_f = rule == CoordinateRule::kMean ? 0 : static_cast<int>(f);
  return cuda_status(
      static_cast<cudaError_t>(ballot_robust_cuda_launch_coordinate_wise(
          static_cast<int>(op_of(rule)), static_cast<int>(n), rule_f, d_inputs, d, d_out, d_non_finite, stream)),
      "coordinate-wise kernel launch");
}

std::optional<DeviceRule> device_rule(const Aggregator& aggregator) noexcept {
  if (dynamic_cast<const Mean*>(&aggregator) != nullptr) return DeviceRule{CoordinateRule::kMean, 0};
  if (const auto* median = dynamic_cast<const CoordinateMedian*>(&aggregator)) {
    return DeviceRule{CoordinateRule::kMedian, median->options().f};
  }
  if (const auto* trimmed = dynamic_cast<const TrimmedMean*>(&aggregator)) {
    return DeviceRule{CoordinateRule::kTrimmedMean, trimmed->options().f};
  }
  if (const auto* meamed = dynamic_cast<const MeanAroundMedian*>(&aggregator)) {
    return DeviceRule{CoordinateRule::kMeanAroundMedian, meamed->options().f};
  }
  return std::nullopt;
}

Result<AggregationResult> coordinate_wise_on_device(CoordinateRule rule, std::size_t f, const InputMatrix& inputs) {
  const std::size_t n = inputs.n(), d = inputs.d();
  BALLOT_TRY(check(rule, n, f));
  BALLOT_TRY(require_device());
  DeviceBuffer<float> d_inputs(n * d), d_out(d);
  DeviceBuffer<std::uint64_t> d_non_finite(1);
  BALLOT_TRY(d_inputs.status());
  BALLOT_TRY(d_out.status());
  BALLOT_TRY(d_non_finite.status());
  for (std::size_t i = 0; i < n && d > 0; ++i) BALLOT_TRY(d_inputs.upload(inputs.row(i), i * d, d));
  BALLOT_TRY(coordinate_wise(rule, f, d_inputs.get(), n, d, d_out.get(), d_non_finite.get(), nullptr));
  AggregationResult result;
  result.value.resize(d);
  std::uint64_t non_finite = 0;
  BALLOT_TRY(d_out.download(result.value.data()));
  BALLOT_TRY(d_non_finite.download(&non_finite));
  for (std::size_t i = 0; i < n; ++i) {
    if ((non_finite >> i) & 1u) result.report.non_finite.push_back(i);
  }
  if (result.report.non_finite.size() == n) return make_error(ErrorCode::kPrecondition, "every input is non-finite");
  result.report.excluded = result.report.non_finite;
  return result;
}

}  // namespace ballot::robust::cuda
