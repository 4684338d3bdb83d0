// The coordinate-wise kernels. See launch.h for why this unit has a C interface.
#include <cuda_runtime.h>

#include "robust/cuda/detail/launch.h"

// nvcc's implicit headers declare ::ballot(bool); rename our namespace inside this unit only
// (everything used from it is inline, so nothing with the renamed namespace reaches the link).
#define ballot ballot_in_cuda_unit
#include "robust/cuda/detail/coordinate_logic.h"

namespace {

using ballot_in_cuda_unit::robust::cuda::CoordinateOp;
using ballot_in_cuda_unit::robust::cuda::CoordinatePlan;
using ballot_in_cuda_unit::robust::cuda::plan_for;
using ballot_in_cuda_unit::robust::cuda::reduce_column;

constexpr int kThreadsPerBlock = 256;

// Enough blocks to fill every SM (eight blocks of 256 threads is the most one SM holds), the
// coordinates split by a grid-stride loop: the second pass, which usually finds nothing to do,
// then costs one launch of a few blocks rather than one block per 256 coordinates.
unsigned grid_for(std::size_t count) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0) {
    sms = 132;
  }
  const std::size_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const std::size_t cap = static_cast<std::size_t>(sms) * 8;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks < cap ? blocks : cap);
}

// One thread per coordinate (grid-stride): the column of every row in kWires registers, the rule
// of coordinate_logic.h, one output. Two launches per call, as the CPU makes two attempts:
// the first (exclude = false) uses every row and ORs the rows it finds non-finite into
// *non_finite; the second (exclude = true) returns at once when that mask is 0 and otherwise
// recomputes every coordinate without those rows, overwriting the first pass's output. The row
// reads are coalesced: a warp reads 32 consecutive floats of each row.
template <CoordinateOp kOp, int kWires>
__global__ void __launch_bounds__(kThreadsPerBlock)
    coordinate_kernel(const float* __restrict__ inputs, int n, std::size_t d, int f,
                      std::uint64_t* __restrict__ non_finite, bool exclude, float* __restrict__ out) {
  std::uint64_t excluded = 0;
  if (exclude) {
    excluded = *non_finite;
    if (excluded == 0) return;  // uniform: every thread reads the same word
  }
  const CoordinatePlan plan = plan_for(kOp, n, f, excluded);
  std::uint64_t bad = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < d; j += stride) {
    bad |= reduce_column<kOp, kWires>(inputs, d, j, plan, out);
  }
  // One atomic per warp that saw a non-finite value (never in the second pass: it reads no such
  // row). Every lane gets here, so the full-warp shuffles are safe.
  if (__any_sync(0xffffffffu, bad != 0)) {
    for (int offset = 16; offset > 0; offset /= 2) bad |= __shfl_xor_sync(0xffffffffu, bad, offset);
    if (threadIdx.x % 32 == 0) {
      atomicOr(reinterpret_cast<unsigned long long*>(non_finite), static_cast<unsigned long long>(bad));
    }
  }
}

template <CoordinateOp kOp, int kWires>
cudaError_t launch(const float* inputs, int n, std::size_t d, int f, std::uint64_t* non_finite, float* out,
                   cudaStream_t stream) {
  const unsigned grid = grid_for(d);
  coordinate_kernel<kOp, kWires><<<grid, kThreadsPerBlock, 0, stream>>>(inputs, n, d, f, non_finite, false, out);
  coordinate_kernel<kOp, kWires><<<grid, kThreadsPerBlock, 0, stream>>>(inputs, n, d, f, non_finite, true, out);
  return cudaGetLastError();
}

template <CoordinateOp kOp>
cudaError_t launch_for(const float* inputs, int n, std::size_t d, int f, std::uint64_t* non_finite, float* out,
                       cudaStream_t stream) {
  switch (ballot_in_cuda_unit::robust::cuda::wires_for(n)) {
    case 8:
      return launch<kOp, 8>(inputs, n, d, f, non_finite, out, stream);
    case 16:
      return launch<kOp, 16>(inputs, n, d, f, non_finite, out, stream);
    case 24:
      return launch<kOp, 24>(inputs, n, d, f, non_finite, out, stream);
    case 32:
      return launch<kOp, 32>(inputs, n, d, f, non_finite, out, stream);
    case 48:
      return launch<kOp, 48>(inputs, n, d, f, non_finite, out, stream);
    default:
      return launch<kOp, 64>(inputs, n, d, f, non_finite, out, stream);
  }
}

}  // namespace

extern "C" int ballot_robust_cuda_launch_coordinate_wise(int op, int n, int f, const float* d_inputs, std::size_t d,
                                                         float* d_out, std::uint64_t* d_non_finite, void* stream) {
  (void)cudaGetLastError();  // report this call's errors, not one an earlier call of the thread left
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaError_t zeroed = cudaMemsetAsync(d_non_finite, 0, sizeof(std::uint64_t), s);
  if (zeroed != cudaSuccess || d == 0) return zeroed;
  switch (static_cast<CoordinateOp>(op)) {
    case CoordinateOp::kMean:
      return launch_for<CoordinateOp::kMean>(d_inputs, n, d, f, d_non_finite, d_out, s);
    case CoordinateOp::kMedian:
      return launch_for<CoordinateOp::kMedian>(d_inputs, n, d, f, d_non_finite, d_out, s);
    case CoordinateOp::kTrimmedMean:
      return launch_for<CoordinateOp::kTrimmedMean>(d_inputs, n, d, f, d_non_finite, d_out, s);
    case CoordinateOp::kClosestWindow:
      return launch_for<CoordinateOp::kClosestWindow>(d_inputs, n, d, f, d_non_finite, d_out, s);
  }
  return cudaErrorInvalidValue;
}
