#include "transport/memory_transport.h"

#include <string>

#include "transport/detail/endpoint.h"
#include "transport/signature_cache.h"

namespace ballot::transport {

std::shared_ptr<MemoryNetwork> MemoryNetwork::create() {
  auto network = std::shared_ptr<MemoryNetwork>(new MemoryNetwork());
  network->signature_cache_ = std::make_shared<SignatureCache>();
  return network;
}

Result<std::unique_ptr<MemoryTransport>> MemoryNetwork::attach(LocalIdentity self, Registry registry,
                                                               TransportOptions options) {
  const NodeId node = self.node;
  // A frame broadcast to many endpoints of this network is the same signed bytes for each.
  if (!options.signature_cache) options.signature_cache = signature_cache_;
  auto core = std::make_shared<detail::EndpointCore>(std::move(self), std::move(registry), options, true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (endpoints_.count(node) != 0)
    return make_error(ErrorCode::kInvalidArgument, "node " + std::to_string(node) + " is already attached");
  endpoints_.emplace(node, core);
  return std::unique_ptr<MemoryTransport>(new MemoryTransport(shared_from_this(), std::move(core)));
}

Status MemoryNetwork::deliver(NodeId from, NodeId to, const OutboundFrame& frame, std::chrono::milliseconds timeout) {
  std::shared_ptr<detail::EndpointCore> receiver;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = endpoints_.find(to);
    if (it != endpoints_.end()) receiver = it->second;
  }
  if (!receiver) return make_error(ErrorCode::kUnavailable, "node " + std::to_string(to) + " is not attached", to);
  if (!receiver->wait_for_space(std::chrono::steady_clock::now() + timeout))
    return make_error(ErrorCode::kTimeout, "inbox of node " + std::to_string(to) + " stayed full", to);
  // The receiver's verdict is not the sender's business (as on a real network): rejected frames
  // are counted and reported on the receiving side.
  (void)receiver->accept_bytes(from, frame.to_bytes());
  return {};
}

void MemoryNetwork::detach(NodeId node) {
  std::shared_ptr<detail::EndpointCore> core;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = endpoints_.find(node);
    if (it == endpoints_.end()) return;
    core = std::move(it->second);
    endpoints_.erase(it);
  }
  core->close_inbox();
}

MemoryTransport::MemoryTransport(std::shared_ptr<MemoryNetwork> network, std::shared_ptr<detail::EndpointCore> core)
    : network_(std::move(network)), core_(std::move(core)) {}

MemoryTransport::~MemoryTransport() { network_->detach(core_->self()); }

NodeId MemoryTransport::self() const { return core_->self(); }

OutboundFrame MemoryTransport::seal(MessageType type, std::uint64_t round,
                                    std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  return core_->seal(type, round, std::move(payload));
}

Status MemoryTransport::send_frame(NodeId to, OutboundFrame frame) {
  if (core_->verifier().registry().find(to) == nullptr)
    return make_error(ErrorCode::kNotFound, "node " + std::to_string(to) + " is not in the registry", to);
  if (to == core_->self()) return make_error(ErrorCode::kInvalidArgument, "cannot send to self");
  return network_->deliver(core_->self(), to, frame, core_->options().send_timeout);
}

Result<Message> MemoryTransport::receive(std::chrono::milliseconds timeout) { return core_->pop(timeout); }

const FrameLimits& MemoryTransport::limits() const { return core_->options().limits; }

void MemoryTransport::set_round(std::uint64_t round) { core_->verifier().set_round(round); }
void MemoryTransport::reset_round(std::uint64_t round) { core_->verifier().reset_round(round); }

MisbehaviourCounts MemoryTransport::misbehaviour_counts(NodeId peer) const { return core_->counts(peer); }
Status MemoryTransport::check_relayed(const SignedEnvelope& envelope, ByteSpan payload) const {
  return core_->verifier().verify_authentic(envelope, payload, std::nullopt).status;
}

}  // namespace ballot::transport
