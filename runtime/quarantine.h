// Quarantine: the server stops counting votes from a node that keeps misbehaving.
//
// It observes the transport (transport::MisbehaviourObserver) and the server's own protocol
// checks. A proven equivocation quarantines the sender at once (the proof is kept); any other
// misbehaviour (bad signature, replay, stale round, malformed payload, …) counts, and a node
// reaching `threshold` events is quarantined for the rest of the run. A quarantined node's votes
// are dropped unread; it still counts against the fault budget b like a crashed node, so the run
// goes on as long as at most b nodes are missing or quarantined.
// Thread-safety: observer callbacks arrive on I/O threads; every member is safe to call
// concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "transport/misbehaviour.h"

namespace ballot::runtime {

struct QuarantineOptions {
  std::uint64_t threshold = 3;  // events before a node is quarantined (equivocation: at once)
};

class Quarantine final : public transport::MisbehaviourObserver {
 public:
  explicit Quarantine(QuarantineOptions options = {}) : options_(options) {}

  void on_misbehaviour(const transport::MisbehaviourReport& report) override;
  void on_equivocation(const transport::EquivocationProof& proof) override;
  // A protocol violation the server itself found (e.g. an undecodable vote payload).
  void report(transport::NodeId node);

  bool is_quarantined(transport::NodeId node) const;
  std::vector<transport::NodeId> quarantined() const;
  std::uint64_t events(transport::NodeId node) const;
  std::vector<transport::EquivocationProof> proofs() const;

 private:
  void count(transport::NodeId node, std::uint64_t weight);
  const QuarantineOptions options_;
  mutable std::mutex mutex_;  // guards everything below
  std::map<transport::NodeId, std::uint64_t> events_;
  std::set<transport::NodeId> quarantined_;
  std::vector<transport::EquivocationProof> proofs_;
};

}  // namespace ballot::runtime
