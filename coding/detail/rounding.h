// Stochastic rounding for QSGD and TernGrad: 16 random bits per coordinate from Philox4x32-10
// (core/philox.h), fused with the quantisation and the bit packing.
//
// Which bits a coordinate gets. A RoundingStream owns Philox blocks [first_block, first_block +
// 16⌈d/128⌉) of the Rng's stream (key = seed, counter = (block, stream)). Coordinates go in groups
// of 128: group g uses blocks first_block + 16g + j (j = 0..15), and coordinate 128g + 16m + j
// (m = 0..7) gets k = bits [16(m%2), 16(m%2) + 16) of word m/2 of block first_block + 16g + j.
// That order lets a vector Philox (one block per lane) hand every lane its own coordinate's bits
// without a transpose; one 128-bit Philox output serves 8 coordinates (the old one-word-per-
// coordinate stream needed 4x the Philox work).
//
// Resolution. The draw is u = (k + 1/2)/2^16 and a coordinate rounds up iff u < p (p its
// fractional part), so P[up] = max(0, ⌈2^16 p − 1/2⌉)/2^16: |P[up] − p| ≤ 2^-17. The estimate is
// unbiased up to 2^-17 of one quantisation step per coordinate (QSGD: ‖v‖/s; TernGrad: the scale),
// far below the statistical tests' tolerance; values on a level (p = 0) never move and TernGrad's
// largest entry (p = 1) is always kept.
//
// Determinism. Every ISA level (scalar reference, AVX2, AVX-512; kernels::active_isa(), capped by
// kernels::set_isa_limit for tests) computes the same bits: the lanes use IEEE float operations
// only (multiply, subtract, min, compare, truncate), no FMA, in the order of the scalar code.
// Thread-safety: pure functions over disjoint outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/rng.h"

namespace ballot::coding::detail {

inline constexpr std::size_t kRoundingGroup = 128;  // coordinates per 16 Philox blocks
inline constexpr float kRoundingScale = 65536.0f;   // 2^16 draws per coordinate

struct RoundingStream {
  // Takes the window for `d` coordinates at the Rng's position (rounded up to a whole Philox
  // block, i.e. 4 words) and moves the Rng past it.
  RoundingStream(Rng& rng, std::uint64_t d);
  RoundingStream(std::uint64_t seed_, std::uint64_t stream_, std::uint64_t first_block_)
      : seed(seed_), stream(stream_), first_block(first_block_) {}
  // Philox blocks (and, times 4, Rng words) the window for d coordinates occupies.
  static std::uint64_t blocks_for(std::uint64_t d) { return 16 * ((d + kRoundingGroup - 1) / kRoundingGroup); }
  // k of coordinate i (the scalar definition of the mapping above).
  std::uint16_t bits(std::uint64_t i) const;

  std::uint64_t seed, stream, first_block;
};

// QSGD on coordinates [lo, hi) of x (x points at coordinate 0 of the whole gradient):
//   r = min(|x_i|·inv, s) (NaN -> s), l = ⌊r⌋, level = l + [u_i < r − l];
// ORs bit i of `signs` with 1 for non-negative x_i (sign(±0) = sign(NaN) = +1) and bit i of plane
// p (at planes + p·plane_bytes) with bit p of the level, p < num_planes. Bits outside [lo, hi)
// are untouched. Streams are little-endian packed words (core/bit_vector.h), any alignment.
void qsgd_quantize(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv, float s,
                   std::uint8_t* signs, std::uint8_t* planes, std::size_t plane_bytes, int num_planes);

// The levels alone, level[i - lo] for i in [lo, hi) (Elias-coded QSGD). Same values as above.
void qsgd_levels(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float inv, float s,
                 std::uint32_t* level);

// TernGrad on [lo, hi): sign bits as above; keep bit = [u_i < min(|x_i|, limit)·inv] (NaN -> the
// limit), or 1 for every coordinate when keep_all (a non-finite scale must decode non-finite).
void terngrad_quantize(const RoundingStream& random, const float* x, std::size_t lo, std::size_t hi, float limit,
                       float inv, bool keep_all, std::uint8_t* signs, std::uint8_t* keep);

// A fold (per-word XOR, mixed into 64 bits; coding/detail/rounding.cc) of the Philox blocks behind
// the draws of coordinates [0, d), generated the way the
// quantisers above generate them (the vector Philox on AVX-512 and AVX2). It does nothing else,
// so its time is the random stream's share of QSGD and TernGrad: the benchmark reports it as part
// of their physical floor (bench/coding/codecs_bench.cc), and a test checks that every ISA level
// folds the same blocks as the scalar definition.
std::uint64_t fold_rounding_blocks(const RoundingStream& random, std::uint64_t d);

}  // namespace ballot::coding::detail
