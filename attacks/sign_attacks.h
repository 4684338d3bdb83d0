// Sign-domain attacks of the election-coding paper (Sohn et al. 2020; ALGORITHMS.md §6): what a
// Byzantine node sends instead of its honest 1-bit vote.
//   reverse      the negated vote −c_i (each partition sign negated, so the local majority flips)
//   random       uniform ±1 per coordinate
//   directional  all +1 (sign=+1) or all −1 (sign=−1)
// The Byzantine indices are drawn uniformly once per run from the seed (the paper's model), so
// every process of a cluster and the simulator agree on who attacks.
// The omniscient, code-aware attacker is coding/election_adversary.h; protocol-level attacks
// (crash, delay, equivocation, forged frames) act on the transport, not on the vote.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bit_vector.h"
#include "core/result.h"
#include "core/rng.h"

namespace ballot::attacks {

enum class SignAttackKind : std::uint8_t { kNone, kReverse, kRandom, kDirectional };

struct SignAttack {
  SignAttackKind kind = SignAttackKind::kNone;
  bool direction = true;  // directional: true = all +1

  // "none" | "reverse" | "random" | "directional[:sign=+1|-1]"; errors name the problem.
  static Result<SignAttack> parse(std::string_view spec);
  std::string spec() const;
};

// `count` distinct node indices of [0, n), uniformly at random from (seed, purpose stream),
// ascending. count > n is kInvalidArgument.
Result<std::vector<std::size_t>> choose_byzantine(std::size_t n, std::size_t count, std::uint64_t seed);

// Replaces `vote` (the honest vote of round `round`) by what the attacker sends. Random draws
// come from Rng(seed, stream_id({round, node, purpose})): reproducible. O(d).
void corrupt_vote(const SignAttack& attack, std::uint64_t seed, std::uint64_t round, std::size_t node,
                  BitVector& vote);

}  // namespace ballot::attacks
