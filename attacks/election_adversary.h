// The omniscient adversary of election coding (moved here from coding/: only the attacks use it) (DESIGN.md: Byzantine
// nodes may be omniscient and colluding even where the paper's theory assumes they are not).
//
// plan_omniscient_attack: knows G and every partition sign (replicated placement, threat model
// (a) of tolerance.h) and picks the coalition of b nodes and their votes that make the most
// coordinates of the final vote differ from the target μ = coordinate-wise majority of the
// partition signs. Given a coalition, voting −μ everywhere is optimal coordinate by coordinate;
// the coalition is searched exhaustively when C(n, b) ≤ max_exhaustive_sets (then optimal), else
// greedily with 1-swap local search (a heuristic: `exhaustive` says which).
// Method: coordinates are grouped by (set of nodes voting μ, votes needed), so evaluating a
// coalition costs O(#distinct groups) rather than O(d). Preconditions: n ≤ 64, b ≤ n, all
// partition sign vectors of one size (BALLOT_ENFORCE). Deterministic; thread-safe.
//
// smallest_breaking_coalition: the fewest Byzantine nodes that defeat G in the worst case, with
// the sign pattern on which they do (the exhaustive certificate, tolerance.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "coding/allocation_matrix.h"
#include "coding/tolerance.h"
#include "core/bit_vector.h"
#include "core/result.h"

namespace ballot::attacks {

struct OmniscientOptions {
  std::uint64_t max_exhaustive_sets = 20000;
  int max_local_search_rounds = 100;
};

struct OmniscientAttack {
  std::vector<std::uint32_t> byzantine;  // ascending node ids
  std::vector<BitVector> messages;       // the vote each Byzantine node sends (same order)
  BitVector target;                      // μ
  BitVector honest_vote;                 // the decoder's output without attack
  BitVector attacked_vote;               // the decoder's output under this attack
  std::size_t errors = 0;                // coordinates where attacked_vote ≠ μ
  std::size_t flipped = 0;               // coordinates where attacked_vote ≠ honest_vote
  bool exhaustive = false;               // the coalition is optimal (all subsets tried)
};

OmniscientAttack plan_omniscient_attack(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::size_t b, const OmniscientOptions& options = {});

// The smallest coalition that breaks G under `model`, with its sign pattern. kNotFound under (b)
// when no coalition smaller than n/2 breaks validity; errors of max_tolerated_b otherwise.
Result<coding::CounterExample> smallest_breaking_coalition(const coding::AllocationMatrix& g,
                                                           coding::ThreatModel model);

}  // namespace ballot::attacks
