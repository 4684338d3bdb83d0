// Instruction-set levels of the CPU code, chosen at run time: Ballot's one ISA-dispatch idiom.
//
// Every module with per-level code (the sign kernels here, robust's inner loops, coding's loops
// and stochastic rounding, transport's 16-lane SHA-256) asks active_isa() and runs the matching
// implementation; none detects CPU features itself. A level stands for a feature set:
//   kScalar  baseline x86-64 (or any other CPU)
//   kAvx2    AVX2, FMA, POPCNT, F16C
//   kAvx512  AVX-512 F, BW, VL, DQ (and the kAvx2 set)
// Every level computes bit-identical results to kScalar (the reference), except where a module's
// contract says otherwise (robust rules: float rounding, docs/robust.md).
// A level may run a kernel of the level below where that is faster on this CPU (the sign pack on
// AMD Zen 4, which splits 512-bit operations: kernels/dispatch.cc).
//
// One switch caps the level, for tests and benchmarks that compare levels: set_isa_limit() (or a
// ScopedIsaLimit). Its initial value comes from the environment variable BALLOT_ISA
// (scalar | avx2 | avx512), read once at the first call of any function here; unset means no
// cap. `BALLOT_ISA=scalar ctest` runs the whole suite on the reference code. Thread-safe.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace ballot::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view isa_name(Isa isa) noexcept;
// The level named "scalar", "avx2" or "avx512"; nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view name) noexcept;
// True when this CPU (and the operating system) can run `isa`.
bool isa_supported(Isa isa) noexcept;
// All levels this CPU supports, in increasing order (always begins with kScalar); not capped.
std::vector<Isa> supported_isas();
// The level in use: the best supported level not above the limit.
Isa active_isa() noexcept;
// True on AMD family 19h (Zen 3, Zen 4): four FP pipes, and 512-bit operations executed as two
// 256-bit halves (so the AVX-512 level packs signs with the AVX2 kernel there; kernels/dispatch.cc).
bool cpu_splits_512_bit_vectors() noexcept;
// The cap: kAvx512 = none, unless BALLOT_ISA set another.
Isa isa_limit() noexcept;
// Caps the level used by every module's dispatched functions (kAvx512 = no cap).
void set_isa_limit(Isa limit) noexcept;

// Caps the level for a scope and restores the previous cap after it (tests: one level per run).
class ScopedIsaLimit {
 public:
  explicit ScopedIsaLimit(Isa limit) noexcept : previous_(isa_limit()) { set_isa_limit(limit); }
  ~ScopedIsaLimit() { set_isa_limit(previous_); }
  ScopedIsaLimit(const ScopedIsaLimit&) = delete;
  ScopedIsaLimit& operator=(const ScopedIsaLimit&) = delete;

 private:
  Isa previous_;
};

}  // namespace ballot::kernels
