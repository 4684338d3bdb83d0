// Instruction-set levels of the CPU kernels, chosen at run time from the CPU's features.
//
// Every level computes bit-identical results to kScalar (the reference). By default the best
// level the CPU supports is used; set_isa_limit() caps it, for tests and benchmarks that compare
// levels. Thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace ballot::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view isa_name(Isa isa) noexcept;
// True when this CPU (and the operating system) can run `isa`.
bool isa_supported(Isa isa) noexcept;
// All levels this CPU supports, in increasing order (always begins with kScalar).
std::vector<Isa> supported_isas();
// The level in use: the best supported level not above the limit.
Isa active_isa() noexcept;
// Caps the level used by the public kernel functions (kAvx512 = no cap).
void set_isa_limit(Isa limit) noexcept;

}  // namespace ballot::kernels
