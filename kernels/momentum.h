// Signum's momentum update, the one implementation behind learning's WorkerMomentum (and its
// single-process Signum rule) and coding's SignumCodec:
//   m ← βm + (1−β)g   (Bernstein et al. 2018, Alg. 1; ALGORITHMS.md §1), in fp32.
// β and 1−β are computed in double and each rounded to float once: β = 0.9 multiplies by 0.9f
// and 0.1f (not by 1.0f − 0.9f = 0.10000002f), so a momentum built from the same β is
// bit-identical wherever it runs, the CUDA kernel included (kernels/update_logic.h), and on every
// ISA level (runtime-dispatched vector loops of the same per-lane steps). O(d), memory-bound; the
// caller owns both spans, no thread-safety of its own.
#pragma once

#include <cstddef>
#include <span>

#include "core/enforce.h"
#include "kernels/update_logic.h"

namespace ballot::kernels {

// The fp32 factors (β, 1−β) of `beta` in [0, 1).
struct MomentumFactors {
  float keep;  // β
  float mix;   // 1 − β, computed in double
};
inline MomentumFactors momentum_factors(double beta) noexcept {
  return {static_cast<float>(beta), static_cast<float>(1.0 - beta)};
}

// momentum[i] ← keep·momentum[i] + mix·gradient[i]; sizes must match (BALLOT_ENFORCE).
void signum_momentum(std::span<float> momentum, std::span<const float> gradient, MomentumFactors factors);
inline void signum_momentum(std::span<float> momentum, std::span<const float> gradient, double beta) {
  signum_momentum(momentum, gradient, momentum_factors(beta));
}

}  // namespace ballot::kernels
