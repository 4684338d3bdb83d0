// Chooses the robust kernels of the active ISA level (kernels::active_isa(), capped by
// set_isa_limit), falling back to a lower level when the CPU lacks FMA.
#include "robust/detail/isa_kernels.h"

#include "kernels/isa.h"

namespace ballot::robust::detail {
namespace generic { extern const IsaKernels kKernels; }
#if defined(__x86_64__)
namespace avx2 { extern const IsaKernels kKernels; }
namespace avx512 { extern const IsaKernels kKernels; }
#endif

const IsaKernels& isa_kernels() {
#if defined(__x86_64__)
  static const bool has_fma = __builtin_cpu_supports("fma");
  switch (kernels::active_isa()) {
    case kernels::Isa::kAvx512:
      if (has_fma && __builtin_cpu_supports("avx512dq")) return avx512::kKernels;
      [[fallthrough]];
    case kernels::Isa::kAvx2:
      if (has_fma) return avx2::kKernels;
      [[fallthrough]];
    case kernels::Isa::kScalar:
      break;
  }
#endif
  return generic::kKernels;
}

}  // namespace ballot::robust::detail
