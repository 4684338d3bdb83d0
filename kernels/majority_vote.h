// Coordinate-wise majority vote of packed sign vectors, bit-sliced (CPU, runtime-dispatched).
//
// For every coordinate, output bit = 1 iff the (weighted) number of inputs with bit 1 is at least
// half of the total weight: ties go to +1, and an empty vote (no inputs or zero total weight)
// gives all +1. This is signSGD with majority vote (Bernstein et al., ICLR 2019) and the election
// code decoder (Sohn et al., NeurIPS 2020).
//
// Method: ⌈log2(W+1)⌉ bit-planes of a counter per 64 coordinates; input words are added with
// full-adder logic (unweighted, seven at a time through a carry-save tree first) and the counter
// is compared with the threshold at the end, with no unpacking.
// Cost: O(n · d/64 · log W) word operations, reading each input once. Deterministic,
// bit-identical on every ISA level; thread-safe for distinct outputs.
#pragma once

#include <cstdint>
#include <span>

#include "core/bit_vector.h"

namespace ballot::kernels {

// All inputs must have the same size; out takes that size. With no inputs, out keeps its size
// and becomes all +1.
void majority_vote(std::span<const BitVector* const> inputs, BitVector& out);
void majority_vote(std::span<const BitVector> inputs, BitVector& out);

// Input i counts weights[i] times (weights.size() == inputs.size(), total weight < 2^32).
void weighted_majority_vote(std::span<const BitVector* const> inputs, std::span<const std::uint32_t> weights,
                            BitVector& out);

}  // namespace ballot::kernels
