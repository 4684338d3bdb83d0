#include "attacks/sign_attacks.h"

#include <algorithm>

#include "core/spec.h"

namespace ballot::attacks {
namespace {
constexpr std::uint64_t kChoosePurpose = 0x627973656c656374ULL;  // "byselect"
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

std::string SignAttack::spec() const {
  switch (kind) {
    case SignAttackKind::kNone: return "none";
    case SignAttackKind::kReverse: return "reverse";
    case SignAttackKind::kRandom: return "random";
    case SignAttackKind::kDirectional: return direction ? "directional:sign=+1" : "directional:sign=-1";
  }
  return "none";
}

Result<std::vector<std::size_t>> choose_byzantine(std::size_t n, std::size_t count, std::uint64_t seed) {
  if (count > n) {
    return make_error(ErrorCode::kInvalidArgument, "cannot choose " + std::to_string(count) +
                                                       " Byzantine nodes among " + std::to_string(n));
  }
  std::vector<std::size_t> indices(n);
  for (std::size_t i = 0; i < n; ++i) indices[i] = i;
  Rng rng(seed, Rng::stream_id({kChoosePurpose}));
  rng.shuffle(std::span<std::size_t>(indices));
  indices.resize(count);
  std::sort(indices.begin(), indices.end());
  return indices;
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

}  // namespace ballot::attacks
