// Gradient-domain attacks (ALGORITHMS.md §6): the vector a Byzantine worker sends instead of its
// honest gradient, crafted with an omniscient view of this round's honest vectors.
//
//   sign_flip  −g_own                     (−ḡ when the attacker's own gradient is unknown)
//   scaled     λ·g_own                    (λ·ḡ when unknown)
//   gaussian   N(0, σ²) per coordinate
//   zero       0
//   alie       ḡ − z·s                    (Baruch et al., NeurIPS 2019; all attackers send it)
//              z = Φ⁻¹((n − m − s*)/(n − m)),  s* = ⌊n/2 + 1⌋ − m,  unless Behaviour::z is set
//              (the form of Karimireddy et al.'s reference code; negative for small m)
//   ipm        −ε·ḡ                       (Xie et al., UAI 2019)
//   mimic      g_target, an honest worker's vector (Karimireddy et al., ICLR 2022)
// ḡ and s are the coordinate-wise mean and population standard deviation of the honest rows.
//
// Mean and standard deviation: one pass over the honest rows with Welford's update per coordinate
// into double accumulators, blocked over 4096 coordinates (every row's block in turn, so each input
// float is read once and the block's accumulators stay in L2). One pass because the rows are the
// large operand (n·d floats, possibly many MB) and a second pass would read them again; Welford
// rather than Σx, Σx² because the latter cancels catastrophically when |ḡ| ≫ s. When only ḡ is
// needed (IPM, the fallbacks) it is a plain double sum of the floats, half the work.
// Cost O(n·d) time, O(d) doubles of scratch; only the statistics an attack needs are computed.
//
// Determinism: a pure function of (behaviour, context, rng state); only gaussian draws from rng
// (one normal per coordinate, in order). Non-finite honest values propagate (never crash).
// Thread-safety: reentrant.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "attacks/attack_spec.h"
#include "core/bit_vector.h"
#include "core/rng.h"
#include "robust/aggregator.h"

namespace ballot::attacks {

struct GradientContext {
  robust::InputMatrix honest;  // the honest vectors of this round (omniscient view), rows = honest workers
  std::span<const float> own;  // what this attacker would have sent honestly (may be empty when unknown)
  std::size_t n = 0;           // total workers
  std::size_t m = 0;           // number of attackers
};

// Writes the attacker's vector into `out`, resized to d = honest.d() (own.size() when there are
// no honest rows). Accepts kNone (sends `own`) and every gradient-domain kind; any other kind is a
// precondition failure (BALLOT_ENFORCE). Preconditions: own is empty or of size d; mimic needs at
// least one honest row (its target is taken modulo their number); alie with b.z NaN needs m < n.
void craft_gradient(const Behaviour& b, const GradientContext& ctx, Rng& rng, std::vector<float>& out);

// Vote path: the attacker's 1-bit vote is the sign (bit = value ≥ 0, NaN → +1, as
// kernels::pack_signs) of the vector craft_gradient would send, computed from the same context —
// which may hold the honest gradients or their ±1 sign vectors. So under sign aggregation IPM
// becomes −sign(ḡ) for every ε > 0, and scaled sends sign(own) for λ > 0 and −sign(own) for
// λ < 0, whatever |λ|: scaling does nothing beyond a sign flip. Also accepts the sign-domain
// kinds reverse (−sign(own)), random (uniform bits from rng) and directional; omniscient needs G
// (election_attack.h) and is a precondition failure here.
void craft_vote(const Behaviour& b, const GradientContext& ctx, Rng& rng, BitVector& vote);

// z of ALIE for n workers of which m attack: Φ⁻¹(p) with p = (n − m − s*)/(n − m), s* = ⌊n/2 + 1⌋ − m.
// p is clamped to [1/(2(n−m)), 1 − 1/(2(n−m))] so that z stays finite when the attackers already
// hold a majority (s* ≤ 0) or n is tiny. Precondition m < n. Example: n = 50, m = 24 → p = 24/26,
// z ≈ 1.4261.
double alie_z(std::size_t n, std::size_t m);

// Φ⁻¹(p), the standard normal quantile, for p in (0, 1) (±∞ at 0 and 1, NaN outside): Acklam's
// rational approximation refined by one Halley step on erfc, |error| < 1e-13 over (1e-300, 1).
double normal_quantile(double p);

// Coordinate-wise mean and population standard deviation of the rows (Welford, one pass; see
// above). `stddev` may be null when only the mean is wanted. Both resized to d. Zero rows: all 0.
void honest_moments(const robust::InputMatrix& rows, std::vector<double>& mean, std::vector<double>* stddev);

}  // namespace ballot::attacks
