#include "attacks/sign_attacks.h"

#include <algorithm>

#include "core/enforce.h"
#include "core/spec.h"

namespace ballot::attacks {
namespace {
constexpr std::uint64_t kRandomPurpose = 0x6279726e646d0000ULL;  // "byrndm"
}  // namespace

Result<SignAttack> SignAttack::parse(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(text));
  SignAttack attack;
  if (spec.name() == "none") {
    attack.kind = SignAttackKind::kNone;
  } else if (spec.name() == "reverse") {
    attack.kind = SignAttackKind::kReverse;
  } else if (spec.name() == "random") {
    attack.kind = SignAttackKind::kRandom;
  } else if (spec.name() == "directional") {
    attack.kind = SignAttackKind::kDirectional;
    BALLOT_TRY(spec.check_known({"sign"}));
    const std::string sign = spec.get_string("sign", "+1");
    if (sign != "+1" && sign != "-1" && sign != "1") {
      return make_error(ErrorCode::kInvalidArgument, "directional attack: sign must be +1 or -1, got '" + sign + "'");
    }
    attack.direction = sign != "-1";
    return attack;
  } else {
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown sign attack '" + spec.name() + "' (known: none, reverse, random, directional)");
  }
  BALLOT_TRY(spec.check_known({}));
  return attack;
}

Behaviour SignAttack::behaviour() const {
  Behaviour b;
  switch (kind) {
    case SignAttackKind::kNone:
      b.kind = AttackKind::kNone;
      break;
    case SignAttackKind::kReverse:
      b.kind = AttackKind::kReverse;
      break;
    case SignAttackKind::kRandom:
      b.kind = AttackKind::kRandomSign;
      break;
    case SignAttackKind::kDirectional:
      b.kind = AttackKind::kDirectional;
      break;
  }
  b.direction = direction;
  return b;
}

Result<SignAttack> SignAttack::from_behaviour(const Behaviour& behaviour) {
  SignAttack attack;
  attack.direction = behaviour.direction;
  switch (behaviour.kind) {
    case AttackKind::kNone:
      attack.kind = SignAttackKind::kNone;
      return attack;
    case AttackKind::kReverse:
      attack.kind = SignAttackKind::kReverse;
      return attack;
    case AttackKind::kRandomSign:
      attack.kind = SignAttackKind::kRandom;
      return attack;
    case AttackKind::kDirectional:
      attack.kind = SignAttackKind::kDirectional;
      return attack;
    default:
      return make_error(ErrorCode::kInvalidArgument,
                        "attack '" + std::string(attack_kind_name(behaviour.kind)) + "' is not a simple sign attack");
  }
}

std::string SignAttack::spec() const {
  switch (kind) {
    case SignAttackKind::kNone:
      return "none";
    case SignAttackKind::kReverse:
      return "reverse";
    case SignAttackKind::kRandom:
      return "random";
    case SignAttackKind::kDirectional:
      return direction ? "directional:sign=+1" : "directional:sign=-1";
  }
  return "none";
}

void corrupt_vote(const SignAttack& attack, std::uint64_t seed, std::uint64_t round, std::size_t node,
                  BitVector& vote) {
  switch (attack.kind) {
    case SignAttackKind::kNone:
      return;
    case SignAttackKind::kReverse:
      vote.flip();
      return;
    case SignAttackKind::kDirectional:
      vote.fill(attack.direction);
      return;
    case SignAttackKind::kRandom: {
      Rng rng(seed, Rng::stream_id({round, node, kRandomPurpose}));
      for (auto& word : vote.words()) word = rng.next_u64();
      vote.clear_padding();
      return;
    }
  }
}

void corrupt_vote(const Behaviour& attack, std::uint64_t seed, std::uint64_t round, std::size_t node, BitVector& vote) {
  auto sign = SignAttack::from_behaviour(attack);
  BALLOT_ENFORCE(sign.ok());
  corrupt_vote(*sign, seed, round, node, vote);
}

}  // namespace ballot::attacks
