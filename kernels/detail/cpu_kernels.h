// Internal: the table of raw CPU kernels of one ISA level. Each level lives in its own translation
// unit compiled with that level's flags; nothing else may be compiled with those flags, so that no
// inline function instantiated there with wide instructions can be picked by the linker for
// callers running on an older CPU (the SIMD units call the scalar unit for tails instead).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/update_logic.h"

namespace ballot::kernels::detail {

struct CpuKernels {
  Isa isa;
  // Writes words_for(count) words; padding bits zero.
  void (*pack)(const float* values, std::size_t count, std::uint64_t* words);
  // out[i] = bit (first_bit + i) ? positive : negative, for i < count.
  void (*unpack)(const std::uint64_t* words, std::size_t first_bit, std::size_t count, float negative, float positive,
                 float* out);
  // out word w = bitsliced vote over inputs[i][w]; weights may be null (all 1);
  // `planes` = planes_for(total weight), 1..32.
  void (*vote)(const std::uint64_t* const* inputs, const std::uint32_t* weights, std::size_t num_inputs,
               std::size_t word_begin, std::size_t word_end, std::uint64_t threshold, int planes, std::uint64_t* out);
  // Number of equal bits among the first `bits` bits.
  std::size_t (*agree)(const std::uint64_t* a, const std::uint64_t* b, std::size_t bits);
  // The indices i in [begin, end) whose float bits are not +0, rising, into dst (room for
  // end − begin); returns how many (kernels/float_entries.h).
  std::size_t (*entries)(const float* x, std::size_t begin, std::size_t end, std::uint32_t* dst);
  // How many of x[0, count) are not +0.
  std::size_t (*count_entries)(const float* x, std::size_t count);
  // Signum's momentum, m[i] ← keep·m[i] + mix·g[i] for i < count (kernels/momentum.h).
  void (*momentum)(float* m, const float* g, std::size_t count, float keep, float mix);
  // An update rule over x[0, count) (kernels/update.h): the direction is bit i of `signs` (±1)
  // when signs is not null, else g[i]; SGD with momentum over `buffer` when f.momentum != 0.
  void (*update)(float* x, float* buffer, const float* g, const std::uint64_t* signs, std::size_t count,
                 const SgdFactors& f, bool first_step);
};

extern const CpuKernels kScalarKernels;
// Null when the build has no such level (non-x86 targets).
extern const CpuKernels* const kAvx2Kernels;
extern const CpuKernels* const kAvx512Kernels;

// The table of `isa`, or null when this CPU or build lacks it.
const CpuKernels* cpu_kernels(Isa isa) noexcept;
// The table of active_isa().
const CpuKernels& active_kernels() noexcept;

}  // namespace ballot::kernels::detail
