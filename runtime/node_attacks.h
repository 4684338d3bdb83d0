// The Byzantine node of a run's attack spec (attacks/attack_spec.h), at the node session's one
// seam (NodeAdversary, runtime/node_session.h): gradient-, sign- and data-domain attacks replace
// the vote's content (runtime/adversary.h crafts it, from the coalition's view of the honest
// messages when the attack needs one); protocol-domain attacks replace what is sent — omission,
// delay, equivocation, replay, forged signatures, malformed or oversized frames, a wrong model
// digest — or silence the node (crash). The same in every engine that runs the node session.
#pragma once

#include <memory>
#include <optional>

#include "runtime/adversary.h"
#include "runtime/node_session.h"
#include "runtime/replica.h"

namespace ballot::runtime {

class SpecAdversary final : public NodeAdversary {
 public:
  // `replica` is the node's (the coalition's view is computed on it); `coalition` may be null,
  // then the node computes its own view when the attack needs one.
  SpecAdversary(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                std::shared_ptr<Coalition> coalition);

  Silence silence(std::uint64_t round) override;
  void replace(transport::MessageType type, Content content) override;
  Result<bool> deliver(transport::MessageType type, std::uint64_t round, std::uint32_t deadline_ms,
                       const std::vector<std::uint8_t>& payload, transport::OutboundFrame honest,
                       const std::vector<transport::NodeId>& receivers, Link& link) override;

 private:
  const attacks::Behaviour* protocol(std::uint64_t round) const;

  const TrainingSetup& setup_;
  std::size_t index_;
  Replica& replica_;
  std::shared_ptr<Coalition> coalition_;
  std::optional<transport::OutboundFrame> previous_vote_;  // the replay attack's material
};

// The node's adversary: a SpecAdversary when setup.is_byzantine(node_index), else null (honest).
std::shared_ptr<NodeAdversary> make_node_adversary(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                                                   std::shared_ptr<Coalition> coalition);

}  // namespace ballot::runtime
