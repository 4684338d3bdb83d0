// Quarantine: the server stops counting votes from a node that proved itself faulty.
//
// It observes the transport (transport::MisbehaviourObserver) and the server's own protocol
// checks, and sorts what it sees into three kinds:
//  - proof: a checkable equivocation proof (two different signed messages of one sender for one
//    round and type) quarantines the sender at once; the proof is kept.
//  - evidence: content that arrived on the sender's own mutually authenticated session (or under
//    its signature) and that no honest node produces — a bad signature or payload digest, a
//    malformed or oversize frame, a wrong job, a type its role may not send, a sequence number
//    replayed within one session, an identity mismatch, a signed payload that does not decode or
//    an audited vote or evidence that does not check (report()). A node reaching `threshold`
//    events is quarantined for the rest of the run.
//  - lateness: stale or future rounds, votes for a round already decided, votes on another model,
//    deadlines that passed or connections that ended inside a frame — what a paused, slow or
//    restarting honest node produces. Counted per node and reported (late()), never a quarantine:
//    a late node costs at most the round deadline, as a crashed one does (the fault budget b;
//    in a cluster one deadline in kAbsentProbeEvery rounds: ServerSessionOptions::skip_absent),
//    and its votes count again as soon as they arrive in time (for an absent node: in a probe
//    round, or once it is heard from).
// Security events that blame nobody are counted apart: a second session refused for a live id
// (duplicate_sessions(): either process may be the honest one) and connections that failed before
// authentication (unauthenticated(): no node to blame; a certificate whose key is not the pinned
// one is such a failure, whatever id it names; so is, on a dialling node, an answer from another
// node than the one dialled, which only nodes see: the server never dials).
// A quarantined node's votes are dropped unread; it still counts against the fault budget b like
// a crashed node, so the run goes on as long as at most b nodes are missing or quarantined.
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
  std::uint64_t threshold = 3;  // evidence events before a node is quarantined (proof: at once)
};

// How the quarantine weighs one kind of transport misbehaviour.
enum class Weight : std::uint8_t { kEvidence, kLateness, kNoBlame };
Weight weight_of(transport::Misbehaviour kind) noexcept;

class Quarantine final : public transport::MisbehaviourObserver {
 public:
  explicit Quarantine(QuarantineOptions options = {}) : options_(options) {}

  void on_misbehaviour(const transport::MisbehaviourReport& report) override;
  void on_equivocation(const transport::EquivocationProof& proof) override;
  // Evidence the server itself found (e.g. a signed vote payload that does not decode).
  void report(transport::NodeId node);
  // Lateness the server itself found (a vote for a decided round, a vote on another model).
  void report_late(transport::NodeId node);

  bool is_quarantined(transport::NodeId node) const;
  std::vector<transport::NodeId> quarantined() const;
  std::uint64_t events(transport::NodeId node) const;  // evidence (a proof weighs `threshold`)
  std::uint64_t late(transport::NodeId node) const;
  std::uint64_t duplicate_sessions(transport::NodeId node) const;
  std::uint64_t unauthenticated() const;                     // reports that name no node
  std::vector<transport::EquivocationProof> proofs() const;  // the first proof against each author
  std::size_t proof_count() const;                           // proofs().size(), without the copy

 private:
  void count(transport::NodeId node, std::uint64_t weight);
  const QuarantineOptions options_;
  mutable std::mutex mutex_;  // guards everything below
  std::map<transport::NodeId, std::uint64_t> events_;
  std::map<transport::NodeId, std::uint64_t> late_;
  std::map<transport::NodeId, std::uint64_t> duplicates_;
  std::uint64_t unauthenticated_ = 0;
  std::set<transport::NodeId> quarantined_;
  std::set<transport::NodeId> proven_;  // authors with a proof in proofs_
  std::vector<transport::EquivocationProof> proofs_;
};

}  // namespace ballot::runtime
