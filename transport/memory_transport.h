// MemoryTransport: the Transport interface inside one process, for the simulator (hundreds of
// nodes) and tests. Frames are encoded, signed, decoded and verified exactly as on the wire
// (detail::EndpointCore), so forged, replayed, stale or oversize frames are rejected the same
// way; only the sockets and TLS are missing. The endpoints of one network share a SignatureCache
// (transport/signature_cache.h): a frame broadcast to n endpoints has its signature checked once. The network knows
// which endpoint sent a frame, which plays the part of the TLS peer certificate.
//
// Delivery happens in the sender's thread: send_frame() waits (up to send_timeout) until the
// receiver's inbox has room, which is the back-pressure, then verifies and enqueues.
// Misbehaviour that would end a TLS session is counted and reported; the frame is dropped.
//
// Thread-safety: everything may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "transport/transport.h"

namespace ballot::transport {

namespace detail {
class EndpointCore;
}

class MemoryTransport;

class MemoryNetwork : public std::enable_shared_from_this<MemoryNetwork> {
 public:
  static std::shared_ptr<MemoryNetwork> create();

  // A transport for `self`, verifying what it receives against `registry`.
  // kInvalidArgument if `self.node` is already attached.
  Result<std::unique_ptr<MemoryTransport>> attach(LocalIdentity self, Registry registry, TransportOptions options = {});

 private:
  MemoryNetwork() = default;
  friend class MemoryTransport;
  Status deliver(NodeId from, NodeId to, const OutboundFrame& frame, std::chrono::milliseconds timeout);
  void detach(NodeId node);

  std::mutex mutex_;  // guards endpoints_; never held while delivering
  std::map<NodeId, std::shared_ptr<detail::EndpointCore>> endpoints_;
  std::shared_ptr<SignatureCache> signature_cache_;
};

class MemoryTransport final : public Transport {
 public:
  ~MemoryTransport() override;

  NodeId self() const override;
  OutboundFrame seal(MessageType type, std::uint64_t round,
                     std::shared_ptr<const std::vector<std::uint8_t>> payload) override;
  Status send_frame(NodeId to, OutboundFrame frame) override;
  Result<Message> receive(std::chrono::milliseconds timeout) override;
  const FrameLimits& limits() const override;
  void set_round(std::uint64_t round) override;
  void reset_round(std::uint64_t round) override;
  MisbehaviourCounts misbehaviour_counts(NodeId peer) const override;
  Status check_relayed(const SignedEnvelope& envelope, ByteSpan payload) const override;

 private:
  friend class MemoryNetwork;
  MemoryTransport(std::shared_ptr<MemoryNetwork> network, std::shared_ptr<detail::EndpointCore> core);
  std::shared_ptr<MemoryNetwork> network_;
  std::shared_ptr<detail::EndpointCore> core_;
};

}  // namespace ballot::transport
