// Per-element logic of the sign kernels, shared by the CPU versions and the CUDA kernels
// (BALLOT_HOST_DEVICE), so that the scalar CPU code defines the answer every other version must
// reproduce bit for bit.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ballot::kernels {

// The packing rule: bit 1 (+1) unless the value is strictly negative.
//   +0.0 and -0.0 -> 1: sign(0) = +1, and -0.0 == 0 numerically.
//   NaN          -> 1: a NaN carries no direction, so it is treated as zero. (Robust rules flag
//                      non-finite gradients before they are packed; this only fixes the bits.)
// SIMD versions use the "not less than, unordered" comparison, which is exactly this predicate.
BALLOT_HOST_DEVICE inline bool sign_bit(float value) { return !(value < 0.0f); }

// Vote threshold: output bit = 1 iff (total weight of 1-bits) >= threshold, with
// threshold = ceil(total_weight / 2), so an exact tie goes to +1 and an empty vote gives +1.
BALLOT_HOST_DEVICE inline std::uint64_t vote_threshold(std::uint64_t total_weight) { return (total_weight + 1) / 2; }

// Bit-sliced counters: planes[k] holds bit k of 64 independent counters, one per bit position.
// Adds the 1-bit values `x` (one per position) starting at plane `first_plane` (i.e. adds
// x << first_plane) with ripple carry. Planes past `num_planes` must never be needed: callers size
// the counter for the total weight.
template <typename Word>
BALLOT_HOST_DEVICE inline void bitsliced_add(Word* planes, int num_planes, int first_plane, Word x) {
  Word carry = x;
  for (int k = first_plane; k < num_planes; ++k) {
    const Word next = planes[k] & carry;
    planes[k] ^= carry;
    carry = next;
  }
}

// For every bit position, 1 iff the counter there is >= `threshold` (compared MSB first).
template <typename Word>
BALLOT_HOST_DEVICE inline Word bitsliced_greater_equal(const Word* planes, int num_planes, std::uint64_t threshold) {
  Word greater = Word{};
  Word equal = ~Word{};
  for (int k = num_planes - 1; k >= 0; --k) {
    if ((threshold >> k) & 1u) {
      equal &= planes[k];
    } else {
      greater |= equal & planes[k];
      equal &= ~planes[k];
    }
  }
  // A threshold wider than the counter can never be reached.
  if (num_planes < 64 && (threshold >> num_planes) != 0) return Word{};
  return greater | equal;
}

// Number of planes needed to count up to `total` (at least 1).
BALLOT_HOST_DEVICE inline int planes_for(std::uint64_t total) {
  int planes = 1;
  while (planes < 64 && (total >> planes) != 0) ++planes;
  return planes;
}

}  // namespace ballot::kernels
