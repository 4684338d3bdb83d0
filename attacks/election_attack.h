// The omniscient, code-aware sign-domain attack for a FIXED coalition (ALGORITHMS.md §3 and §6).
// attacks/election_adversary.h chooses the coalition too (plan_omniscient_attack); this is the
// per-round message function the runtime calls once the Byzantine set is fixed for the run
// (attacks/targets.h: random, explicit, or worst_coalition(G)).
//
// Model: threat model (a) of coding/tolerance.h (replicated placement: the partition signs are
// honest and known to the adversary; the coalition lies only in its votes). Target μ = the
// coordinate-wise majority of the partition signs; the decoder is v = maj_i c_i (ties → +1).
//
// Messages: on every coordinate where the coalition voting −μ makes the final vote differ from μ,
// every member votes −μ; on the other coordinates each member sends its honest local vote c_i
// (it cannot change the outcome there, so lying would only leave evidence for an audit of the
// signed inputs).
// Optimality: coordinates are decoded independently and the decoder's output at a coordinate is a
// monotone (majority) function of that coordinate's votes, so if any choice of the members'
// votes makes coordinate c wrong, the choice "all −μ" does. Hence these messages maximise the
// number of coordinates where the final vote ≠ μ over ALL possible messages of this coalition,
// and produce exactly the final vote of plan_omniscient_attack with the same coalition. Where the
// attack-free vote already differs from μ (G fails with no attacker at all), the adversary keeps
// it wrong rather than "flipping" it back to μ.
//
// Cost: O(n·d/64) word operations plus one decode. Deterministic; reentrant.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "coding/allocation_matrix.h"
#include "core/bit_vector.h"

namespace ballot::attacks {

// One vote per coalition member, in the order of `coalition`. Preconditions (BALLOT_ENFORCE):
// partition_signs.size() == g.n(), all of one size d; coalition entries < n and distinct.
std::vector<BitVector> omniscient_votes(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::span<const std::size_t> coalition);

// The replicated election with `coalition` sending omniscient_votes: every node's vote (honest or
// attacked) and the decoder's output. For tests, the simulator and the evaluation report.
struct ElectionOutcome {
  BitVector target;         // μ
  BitVector honest_vote;    // decoder output without attack
  BitVector attacked_vote;  // decoder output under the attack
  std::size_t errors = 0;   // coordinates where attacked_vote ≠ μ
  std::size_t flipped = 0;  // coordinates where attacked_vote ≠ honest_vote
};
ElectionOutcome run_omniscient_election(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::span<const std::size_t> coalition);

}  // namespace ballot::attacks
