// Chooses the robust kernels of the active ISA level (kernels::active_isa(), kernels/isa.h: its
// kAvx2 level includes FMA and its kAvx512 level DQ, which these kernels are compiled with).
#include "robust/detail/isa_kernels.h"

#include "kernels/isa.h"

namespace ballot::robust::detail {
namespace generic {
extern const IsaKernels kKernels;
}
#if defined(__x86_64__)
namespace avx2 {
extern const IsaKernels kKernels;
}
namespace avx512 {
extern const IsaKernels kKernels;
}
#endif

const IsaKernels& isa_kernels() {
#if defined(__x86_64__)
  switch (kernels::active_isa()) {
    case kernels::Isa::kAvx512:
      return avx512::kKernels;
    case kernels::Isa::kAvx2:
      return avx2::kKernels;
    case kernels::Isa::kScalar:
      break;
  }
#endif
  return generic::kKernels;
}

}  // namespace ballot::robust::detail
