// Builds for CPUs other than x86: only the scalar kernels exist.
#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels::detail {
const CpuKernels* const kAvx2Kernels = nullptr;
const CpuKernels* const kAvx512Kernels = nullptr;
}  // namespace ballot::kernels::detail
