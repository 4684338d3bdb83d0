#include "runtime/quarantine.h"

namespace ballot::runtime {

Weight weight_of(transport::Misbehaviour kind) noexcept {
  using transport::Misbehaviour;
  switch (kind) {
    case Misbehaviour::kStaleRound:
    case Misbehaviour::kFutureRound:
    case Misbehaviour::kTimeout:
    case Misbehaviour::kTruncated:
      return Weight::kLateness;
    case Misbehaviour::kHandshakeFailed:
    case Misbehaviour::kDuplicateSession:
    case Misbehaviour::kEquivocation:
      return Weight::kNoBlame;  // equivocation arrives with its proof
    default:
      return Weight::kEvidence;
  }
}

namespace {

std::uint64_t value_of(const std::map<transport::NodeId, std::uint64_t>& counts, transport::NodeId node) {
  const auto it = counts.find(node);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

void Quarantine::on_misbehaviour(const transport::MisbehaviourReport& report) {
  // An unauthenticated connection has no node to blame.
  if (!report.peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++unauthenticated_;
    return;
  }
  if (report.kind == transport::Misbehaviour::kDuplicateSession) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++duplicates_[*report.peer];
    return;
  }
  switch (weight_of(report.kind)) {
    case Weight::kEvidence:
      return count(*report.peer, 1);
    case Weight::kLateness:
      return report_late(*report.peer);
    case Weight::kNoBlame:
      return;
  }
}

void Quarantine::on_equivocation(const transport::EquivocationProof& proof) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto node = proof.first.header.sender;
  // One proof per author is kept (and forwarded): it already quarantines it, and the author
  // could otherwise sign conflicting frames without end to grow this list.
  if (!proven_.insert(node).second) return;
  proofs_.push_back(proof);
  events_[node] += options_.threshold;
  quarantined_.insert(node);
}

void Quarantine::report(transport::NodeId node) { count(node, 1); }

void Quarantine::report_late(transport::NodeId node) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++late_[node];
}

void Quarantine::count(transport::NodeId node, std::uint64_t weight) {
  std::lock_guard<std::mutex> lock(mutex_);
  if ((events_[node] += weight) >= options_.threshold) quarantined_.insert(node);
}

bool Quarantine::is_quarantined(transport::NodeId node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return quarantined_.count(node) != 0;
}

std::vector<transport::NodeId> Quarantine::quarantined() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {quarantined_.begin(), quarantined_.end()};
}

std::uint64_t Quarantine::events(transport::NodeId node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return value_of(events_, node);
}

std::uint64_t Quarantine::late(transport::NodeId node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return value_of(late_, node);
}

std::uint64_t Quarantine::duplicate_sessions(transport::NodeId node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return value_of(duplicates_, node);
}

std::uint64_t Quarantine::unauthenticated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unauthenticated_;
}

std::size_t Quarantine::proof_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return proofs_.size();
}

std::vector<transport::EquivocationProof> Quarantine::proofs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return proofs_;
}

}  // namespace ballot::runtime
