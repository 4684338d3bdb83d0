// The coordinate-wise rules of robust/coordinate_wise.h on a CUDA device, for a server or an
// evaluator whose inputs are already in GPU memory: mean, coordinate-wise median, trimmed mean and
// MeaMed over n ≤ 64 rows of d floats.
//
// Bit-identical to the CPU rules (Mean, CoordinateMedian, TrimmedMean, MeanAroundMedian with the
// same f) for every input, non-finite values included: a row with a NaN or ±Inf anywhere is left
// out and counts against f, the sums are the CPU's double sums in the CPU's order, and every step
// is rounded to nearest, never contracted (robust/cuda/detail/coordinate_logic.h, shared with the tests).
// Cost: one read of the n·d floats when every value is finite; a second read when one is not
// (the CPU also reads again). Deterministic: no atomics in the arithmetic.
// Built only when BALLOT_HAVE_CUDA. Host API in plain C++: streams as void* (a cudaStream_t, null
// for the default stream), device buffers as raw pointers (d_ prefix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/result.h"
#include "robust/aggregator.h"

namespace ballot::robust::cuda {

enum class CoordinateRule { kMean, kMedian, kTrimmedMean, kMeanAroundMedian };
inline constexpr std::size_t kMaxInputs = 64;

// The CPU rule's precondition (kPrecondition: n ≥ 1, and n ≥ 2f + 1 except for the mean, which
// ignores f), then n ≤ kMaxInputs (kInvalidArgument). Needs no device.
Status check(CoordinateRule rule, std::size_t n, std::size_t f);

// d_out[j] = the rule over coordinate j of the n rows, row i at d_inputs + i·d (d_inputs and d_out
// may be null when d = 0). *d_non_finite (one device word) receives bit i set iff row i holds a
// NaN or ±Inf: the CPU's report.non_finite. When every row is non-finite (the CPU's
// kPrecondition), d_out is all NaN. Asynchronous on the stream; checks the arguments (as check,
// plus non-null pointers: kInvalidArgument) before touching the device and the launch after.
Status coordinate_wise(CoordinateRule rule, std::size_t f, const float* d_inputs, std::size_t n, std::size_t d,
                       float* d_out, std::uint64_t* d_non_finite, void* stream);

// The device twin of a CPU rule object: Mean, CoordinateMedian, TrimmedMean and MeanAroundMedian
// (robust/coordinate_wise.h) with their f; nullopt for every other rule and pipeline. Needs no
// device.
struct DeviceRule {
  CoordinateRule rule = CoordinateRule::kMean;
  std::size_t f = 0;
};
std::optional<DeviceRule> device_rule(const Aggregator& aggregator) noexcept;

// Host convenience for tests and small tools: copies the rows to the device, runs, copies back and
// synchronises. The CPU rule's result and report (non_finite = excluded), or its errors;
// kUnavailable without a device (ballot::kernels::cuda::device_count() == 0).
Result<AggregationResult> coordinate_wise_on_device(CoordinateRule rule, std::size_t f, const InputMatrix& inputs);

}  // namespace ballot::robust::cuda
