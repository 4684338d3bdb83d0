// Sign aggregation: coordinate-wise majority vote of packed sign vectors (signSGD with majority
// vote, Bernstein et al., ICLR 2019; the election-code decoder, Sohn et al., NeurIPS 2020).
//
// Output bit = 1 (+1) iff the (weighted) count of +1 votes is at least half of the total weight:
// ties go to +1. Runs on the bit-sliced kernels of kernels/majority_vote.h: O(n·d/64·log W) word
// operations, one read of the inputs. Deterministic and bit-identical on every ISA level.
// Unlike the kernels, these entry points validate what a peer could get wrong and return errors.
// A sign vote tolerates b Byzantine votes out of n only under the papers' assumptions (b < n/2,
// adversaries not coordinating); see docs/robust.md.
#pragma once

#include <cstdint>
#include <span>

#include "core/bit_vector.h"
#include "core/result.h"

namespace ballot::robust {

// kPrecondition when there are no votes; kInvalidArgument when sizes differ (naming the vote).
Result<BitVector> majority_vote(std::span<const BitVector> votes);
Result<BitVector> majority_vote(std::span<const BitVector* const> votes);

// Vote i counts weights[i] times. kInvalidArgument when weights.size() != votes.size(), when the
// total weight is 0 or ≥ 2^32, or when sizes differ.
Result<BitVector> weighted_majority_vote(std::span<const BitVector> votes, std::span<const std::uint32_t> weights);

}  // namespace ballot::robust
