// Runtime choice of the ISA level from the CPU's features (read once).
#include <atomic>

#include "kernels/detail/cpu_kernels.h"
#include "kernels/isa.h"

namespace ballot::kernels {
namespace {

bool cpu_has(Isa isa) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's feature detection also checks that the OS saves the wide registers (XCR0).
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("popcnt");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

std::atomic<Isa> g_limit{Isa::kAvx512};

}  // namespace

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) noexcept { return detail::cpu_kernels(isa) != nullptr; }

std::vector<Isa> supported_isas() {
  std::vector<Isa> levels;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) levels.push_back(isa);
  }
  return levels;
}

Isa active_isa() noexcept { return detail::active_kernels().isa; }

void set_isa_limit(Isa limit) noexcept { g_limit.store(limit, std::memory_order_relaxed); }

namespace detail {

const CpuKernels* cpu_kernels(Isa isa) noexcept {
  static const bool has_avx2 = kAvx2Kernels != nullptr && cpu_has(Isa::kAvx2);
  static const bool has_avx512 = kAvx512Kernels != nullptr && cpu_has(Isa::kAvx512);
  switch (isa) {
    case Isa::kScalar: return &kScalarKernels;
    case Isa::kAvx2: return has_avx2 ? kAvx2Kernels : nullptr;
    case Isa::kAvx512: return has_avx512 ? kAvx512Kernels : nullptr;
  }
  return nullptr;
}

const CpuKernels& active_kernels() noexcept {
  const Isa limit = g_limit.load(std::memory_order_relaxed);
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isa <= limit) {
      if (const CpuKernels* kernels = cpu_kernels(isa)) return *kernels;
    }
  }
  return kScalarKernels;
}

}  // namespace detail
}  // namespace ballot::kernels
