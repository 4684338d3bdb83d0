// Runtime choice of the ISA level from the CPU's features (read once), and the one cap on it.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/detail/cpu_kernels.h"
#include "kernels/isa.h"

namespace ballot::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 29) & 1u) != 0;
}
#endif

bool cpu_has(Isa isa) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's feature detection also checks that the OS saves the wide registers (XCR0).
  switch (isa) {
    case Isa::kScalar:
      return true;
    // Every CPU with AVX2 has FMA and F16C, and every one with AVX-512 BW/VL has DQ: asking for them
    // costs nothing and lets robust's FMA kernels and the fp16 codec's conversions use the same levels.
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("popcnt") &&
             has_f16c();
    case Isa::kAvx512:
      return cpu_has(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

// True on AMD's family 19h (Zen 3 and Zen 4; of these only Zen 4 has AVX-512), which executes
// 512-bit operations as two 256-bit halves. There the AVX-512 pack streams memory slower than the
// AVX2 one (measured on a Zen 4 EPYC VM, d = 2^26: 19.5–20.5 GB/s without the software prefetch,
// 14.7–15.3 GB/s with it, against 23.3–24.1 GB/s for AVX2's 256-bit loads, the read probe's
// speed), while on Intel's server cores the AVX-512 pack is 1.3–1.5× the AVX2 one
// (bench/README.md). The vote and the entry scans are compute-bound and faster in AVX-512 on both.
bool amd_family_19h() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned base_family = (eax >> 8) & 0xfu;
  const unsigned family = base_family == 0xfu ? base_family + ((eax >> 20) & 0xffu) : base_family;
  return family == 0x19u;
#else
  return false;
#endif
}

// The cap's initial value: BALLOT_ISA, the only place Ballot reads it.
Isa limit_from_environment() noexcept {
  const char* text = std::getenv("BALLOT_ISA");
  if (text == nullptr || *text == '\0') return Isa::kAvx512;
  if (const auto isa = parse_isa(text)) return *isa;
  std::fprintf(stderr, "ballot: ignoring BALLOT_ISA=%s (expected scalar, avx2 or avx512)\n", text);
  return Isa::kAvx512;
}

std::atomic<Isa>& limit() noexcept {
  static std::atomic<Isa> value{limit_from_environment()};
  return value;
}

}  // namespace

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) noexcept {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

bool cpu_splits_512_bit_vectors() noexcept {
  static const bool splits = amd_family_19h();
  return splits;
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

Isa isa_limit() noexcept { return limit().load(std::memory_order_relaxed); }

void set_isa_limit(Isa cap) noexcept { limit().store(cap, std::memory_order_relaxed); }

namespace detail {

const CpuKernels* cpu_kernels(Isa isa) noexcept {
  static const bool has_avx2 = kAvx2Kernels != nullptr && cpu_has(Isa::kAvx2);
  static const bool has_avx512 = kAvx512Kernels != nullptr && cpu_has(Isa::kAvx512);
  switch (isa) {
    case Isa::kScalar:
      return &kScalarKernels;
    case Isa::kAvx2:
      return has_avx2 ? kAvx2Kernels : nullptr;
    case Isa::kAvx512: {
      if (!has_avx512) return nullptr;
      // The AVX-512 level with each kernel that is faster in 256-bit vectors on this CPU.
      static const CpuKernels tuned = [] {
        CpuKernels table = *kAvx512Kernels;
        if (cpu_splits_512_bit_vectors() && kAvx2Kernels != nullptr) table.pack = kAvx2Kernels->pack;
        return table;
      }();
      return &tuned;
    }
  }
  return nullptr;
}

const CpuKernels& active_kernels() noexcept {
  const Isa cap = isa_limit();
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isa <= cap) {
      if (const CpuKernels* kernels = cpu_kernels(isa)) return *kernels;
    }
  }
  return kScalarKernels;
}

}  // namespace detail
}  // namespace ballot::kernels
