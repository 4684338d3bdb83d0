// The update rules' loops on the CPU, the twins of kernels/cuda's apply_update: x ← x − η(v + λx)
// (the sign rule, plain SGD) and SGD with momentum, over a whole parameter vector, from a packed
// vote (bit 1 → +1, bit 0 → −1) or an fp32 direction. Each coordinate gets kernels/update_logic.h's
// step, so every ISA level (runtime-dispatched, kernels/isa.h) and the GPU give the same bits (a
// NaN's payload and sign aside: they follow whichever operand the compiler put first).
// O(d), one read and write of the parameters (and of the buffer); memory-bound. The caller owns
// the spans; thread-safe for distinct outputs.
#pragma once

#include <span>

#include "core/bit_vector.h"
#include "kernels/update_logic.h"

namespace ballot::kernels {

// With factors.momentum == 0: x ← x − η(v + λx), and `buffer` is unused (may be empty).
// Otherwise SGD with momentum over `buffer` (params' size), which starts as the decayed direction
// when first_step. vote.size() (or direction.size()) must equal params.size() (BALLOT_ENFORCE).
void apply_update(std::span<float> params, const BitVector& vote, std::span<float> buffer, const SgdFactors& factors,
                  bool first_step);
void apply_update(std::span<float> params, std::span<const float> direction, std::span<float> buffer,
                  const SgdFactors& factors, bool first_step);

}  // namespace ballot::kernels
