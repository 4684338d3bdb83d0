// Sign-domain attacks of the election-coding paper (Sohn et al. 2020; ALGORITHMS.md §6): what a
// Byzantine node sends instead of its honest 1-bit vote.
//   reverse      the negated vote −c_i (what negating its partition signs gives, but on a row whose
//                signs tie, where those give +1 again: −c_i is the stronger lie)
//   random       uniform ±1 per coordinate
//   directional  all +1 (sign=+1) or all −1 (sign=−1)
// The Byzantine indices are drawn uniformly once per run from the seed (the paper's model), so
// every process of a cluster and the simulator agree on who attacks (attacks/targets.h).
// SignAttack is the historical, sign-only spec; attacks/attack_spec.h (Behaviour, AttackSpec) is
// the general one, and corrupt_vote accepts both. The omniscient, code-aware attacker is
// attacks/election_attack.h (messages for a fixed coalition) and attacks/election_adversary.h
// (coalition search); protocol-level attacks act on the transport (attacks/protocol_attacks.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attacks/attack_spec.h"
#include "attacks/targets.h"
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

  // The equivalent Behaviour (kNone, kReverse, kRandomSign, kDirectional), and back: a Behaviour
  // of another kind is kInvalidArgument (its schedule is dropped).
  Behaviour behaviour() const;
  static Result<SignAttack> from_behaviour(const Behaviour& behaviour);
};

// Replaces `vote` (the honest vote of round `round`) by what the attacker sends. Random draws
// come from Rng(seed, stream_id({round, node, purpose})): reproducible. O(d).
void corrupt_vote(const SignAttack& attack, std::uint64_t seed, std::uint64_t round, std::size_t node, BitVector& vote);
// The same for a Behaviour of kind kNone, kReverse, kRandomSign or kDirectional (other kinds are a
// precondition failure, BALLOT_ENFORCE); the schedule is the caller's to check (Behaviour::active).
// Identical output to the SignAttack overload for the same kind.
void corrupt_vote(const Behaviour& attack, std::uint64_t seed, std::uint64_t round, std::size_t node, BitVector& vote);

}  // namespace ballot::attacks
