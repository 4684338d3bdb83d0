#include "runtime/node_attacks.h"

#include <limits>

#include "attacks/protocol_attacks.h"
#include "runtime/messages.h"
#include "runtime/replica.h"

namespace ballot::runtime {

using attacks::AttackKind;
using transport::MessageType;

SpecAdversary::SpecAdversary(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                             std::shared_ptr<Coalition> coalition)
    : setup_(setup), index_(node_index), replica_(replica), coalition_(std::move(coalition)) {
  // An omniscient attacker's view of the honest messages: shared with the other attackers of the
  // process when the caller gives one (the simulator), else its own.
  if (!needs_honest_view(setup_))
    coalition_.reset();
  else if (!coalition_)
    coalition_ = std::make_shared<Coalition>(setup_);
}

std::shared_ptr<NodeAdversary> make_node_adversary(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                                                   std::shared_ptr<Coalition> coalition) {
  if (!setup.is_byzantine(node_index)) return nullptr;
  return std::make_shared<SpecAdversary>(setup, node_index, replica, std::move(coalition));
}

const attacks::Behaviour* SpecAdversary::protocol(std::uint64_t round) const {
  return setup_.active(attacks::Domain::kProtocol, round);
}

NodeAdversary::Silence SpecAdversary::silence(std::uint64_t round) {
  const auto* attack = protocol(round);
  if (attack == nullptr || attack->kind != AttackKind::kCrash) return Silence::kNone;
  // Without an end round the node is gone for good (its process exits); with one it comes back.
  return setup_.attack.find(attacks::Domain::kProtocol)->last_round == std::numeric_limits<std::uint64_t>::max()
             ? Silence::kForever
             : Silence::kRound;
}

void SpecAdversary::replace(MessageType type, Content content) {
  if (type != MessageType::kVote) return;
  if (content.signs != nullptr || content.gradient != nullptr) {
    const RoundView* view = coalition_ ? coalition_->view(replica_, content.round).get() : nullptr;
    if (content.signs != nullptr) byzantine_vote(setup_, view, index_, content.round, *content.signs);
    if (content.gradient != nullptr) byzantine_gradient(setup_, view, index_, content.round, *content.gradient);
  }
  const auto* attack = protocol(content.round);
  if (content.model_digest != nullptr && attack != nullptr && attack->kind == AttackKind::kWrongDigest) {
    (*content.model_digest)[0] ^= 0x01;
  }
}

Result<bool> SpecAdversary::deliver(MessageType type, std::uint64_t round, std::uint32_t deadline_ms,
                                    const std::vector<std::uint8_t>& payload, transport::OutboundFrame honest,
                                    const std::vector<transport::NodeId>& receivers, Link& link) {
  const auto* attack = protocol(round);
  const auto send_all = [&](const transport::OutboundFrame& frame) -> Status {
    for (auto to : receivers) BALLOT_TRY(link.send(to, frame));
    return {};
  };
  if (type == MessageType::kDecisionPiece) {
    // An omitting node keeps every decision piece it should relay (its votes still follow the
    // attack's schedule): the others ask the server for the decision whole.
    if (attack != nullptr && attack->kind == AttackKind::kOmission) return false;
    BALLOT_TRY(send_all(honest));
    return true;
  }
  if (type == MessageType::kPartitionSigns) {
    if (attack != nullptr && attack->kind == AttackKind::kOmission && omits_vote(setup_, index_, round)) return false;
    if (attack == nullptr || attack->kind != AttackKind::kEquivocation) {
      BALLOT_TRY(send_all(honest));
      return true;
    }
    // The natural equivocation of this placement: every other receiver of the column gets signs
    // that differ in one coordinate, under a second signature for the same round (caught by the
    // server across votes); the first receiver gets both (caught by its verifier).
    BALLOT_ASSIGN_OR_RETURN(auto lie, decode_vote(payload, replica_.dimension()));
    lie.signs.set(0, !lie.signs.get(0));
    const auto other = link.seal(MessageType::kPartitionSigns, round, encode(lie));
    for (std::size_t sent = 0; sent < receivers.size(); ++sent) {
      BALLOT_TRY(link.send(receivers[sent], sent % 2 == 1 ? other : honest));
      if (sent == 0) BALLOT_TRY(link.send(receivers[sent], other));
    }
    return true;
  }

  // The vote. The replay attack sends last round's signed vote; every round's own vote is kept.
  std::optional<transport::OutboundFrame> replayed = std::exchange(previous_vote_, honest);
  if (attack == nullptr) {
    BALLOT_TRY(send_all(honest));
    return true;
  }
  Rng rng(setup_.options.seed, Rng::stream_id({round, index_, 0x70726f746f636f6cULL /* "protocol" */}));
  switch (attack->kind) {
    case AttackKind::kOmission:
      if (omits_vote(setup_, index_, round)) return false;
      break;
    case AttackKind::kDelay:
      // Past the deadline by default: the vote arrives when the server has moved on.
      link.sleep_for(attack->delay_ms != 0 ? std::chrono::milliseconds(attack->delay_ms)
                                           : 2 * std::chrono::milliseconds(deadline_ms));
      break;
    case AttackKind::kEquivocation: {
      // Exchange placement: the partition signs equivocate; the vote is one.
      if (setup_.options.placement == Placement::kExchange) break;
      // The vote, then a different one for the same round: the receiver's verifier holds both
      // signed digests, which is a self-contained proof.
      BALLOT_TRY(send_all(honest));
      auto other = payload;
      other.back() ^= 0x01;
      BALLOT_TRY(send_all(link.seal(MessageType::kVote, round, std::move(other))));
      return true;
    }
    case AttackKind::kReplay:  // last round's signed vote instead of this round's
      if (!replayed) return false;
      BALLOT_TRY(send_all(*replayed));
      return false;
    case AttackKind::kForgedSignature:
      BALLOT_TRY(send_all(attacks::forge_signature(std::move(honest))));
      return false;
    case AttackKind::kMalformedFrame:
      BALLOT_TRY(send_all(attacks::malformed_frame(rng)));
      return false;
    case AttackKind::kOversizedFrame:
      BALLOT_TRY(send_all(attacks::oversized_frame(MessageType::kVote, std::uint64_t{1} << 40)));
      return false;
    default:  // kWrongDigest: already wrong in the payload; kCrash: silence()
      break;
  }
  BALLOT_TRY(send_all(honest));
  return true;
}

}  // namespace ballot::runtime
