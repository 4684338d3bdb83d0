#include "runtime/quarantine.h"

namespace ballot::runtime {

void Quarantine::on_misbehaviour(const transport::MisbehaviourReport& report) {
  // An unauthenticated connection has no node to blame; equivocation arrives with its proof.
  if (!report.peer || report.kind == transport::Misbehaviour::kEquivocation) return;
  count(*report.peer, 1);
}

void Quarantine::on_equivocation(const transport::EquivocationProof& proof) {
  std::lock_guard<std::mutex> lock(mutex_);
  proofs_.push_back(proof);
  const auto node = proof.first.header.sender;
  events_[node] += options_.threshold;
  quarantined_.insert(node);
}

void Quarantine::report(transport::NodeId node) { count(node, 1); }

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
  const auto it = events_.find(node);
  return it == events_.end() ? 0 : it->second;
}

std::vector<transport::EquivocationProof> Quarantine::proofs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return proofs_;
}

}  // namespace ballot::runtime
