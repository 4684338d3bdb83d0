// The transport interface: authenticated, signed, fresh messages between the participants of one
// job. Two implementations share it: TlsTransport (Asio + OpenSSL mutual TLS 1.3, real sockets;
// transport/tls_transport.h) and MemoryTransport (in-process, for the simulator and tests;
// transport/memory_transport.h). Both run every received frame through the same decoder and
// Verifier, so a test of misbehaviour handling holds for both.
//
// Delivery: per peer in order, at most once. A frame that fails a check is dropped (bad signature,
// replay, stale/future round, equivocation, wrong job, not permitted) or ends the session (bad
// framing, oversize, truncation, timeout, identity), is counted per peer and reported to the
// observer; the transport and the other sessions carry on.
//
// Thread-safety: all member functions may be called from any thread. receive() may be called by
// several consumers; each message goes to one of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/result.h"
#include "transport/detail/payload_allocator.h"
#include "transport/envelope.h"
#include "transport/frame.h"
#include "transport/identity.h"
#include "transport/misbehaviour.h"

namespace ballot::transport {

// Who this process is: its id, role and envelope-signing key (Credentials carry these too).
struct LocalIdentity {
  NodeId node = 0;
  Role role = Role::kNode;
  SigningKey key;
};

struct TransportOptions {
  std::uint64_t job = 0;                            // envelopes for any other job are rejected
  FrameLimits limits;                               // per-type payload limits, checked before allocating
  std::uint64_t rounds_ahead = 1;                   // VerifierOptions::rounds_ahead
  std::size_t max_send_queue_frames = 64;           // per peer
  std::size_t max_send_queue_bytes = 256ull << 20;  // per peer (a single larger frame is let through alone)
  std::size_t max_inbox_bytes = 256ull << 20;       // reading pauses while the inbox holds more
  std::chrono::milliseconds send_timeout{5000};     // how long send() waits for queue space
  std::shared_ptr<MisbehaviourObserver> observer;   // may be null
  // Shared by the endpoints of one process that receive the same frames (MemoryNetwork gives its
  // endpoints one); null: every signature is verified.
  std::shared_ptr<SignatureCache> signature_cache;
};

// A received payload: a std::vector of bytes (views as std::span / ByteSpan, compares with
// std::vector<std::uint8_t>) that the transport fills without zeroing it first.
using PayloadBytes = std::vector<std::uint8_t, detail::DefaultInitAllocator<std::uint8_t>>;

// A verified message. `payload` is exactly what the sender signed.
struct Message {
  NodeId from = 0;
  MessageType type = MessageType::kControl;
  std::uint64_t round = 0;
  std::uint64_t sequence = 0;
  PayloadBytes payload;
  // The sender's signed envelope (absent for unsigned frames): what a relay hands on as proof of
  // what the sender said (the exchange placement's audited votes, runtime/messages.h).
  std::optional<SignedEnvelope> envelope;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual NodeId self() const = 0;

  // Signs `payload` once and queues it to `to`. Waits up to options.send_timeout while the peer's
  // queue is full (back-pressure), then kTimeout (TlsTransport first makes room where it can:
  // without a session by dropping the oldest round frames, with one by not queuing a second copy
  // of a one-per-round frame and dropping frames of rounds two or more before the new frame's;
  // never control frames). kNotFound for a peer not in the registry, kInvalidArgument for a payload
  // above the type's limit.
  Status send(NodeId to, MessageType type, std::uint64_t round, std::vector<std::uint8_t> payload);
  // One signature, the same bytes to every peer in `to` (first error wins; all are attempted).
  Status broadcast(const std::vector<NodeId>& to, MessageType type, std::uint64_t round,
                   std::vector<std::uint8_t> payload);

  // Seals without sending (one signature for many sends or for relaying later).
  virtual OutboundFrame seal(MessageType type, std::uint64_t round,
                             std::shared_ptr<const std::vector<std::uint8_t>> payload) = 0;
  // Queues pre-encoded frame bytes as they are (the peer checks them like any other).
  virtual Status send_frame(NodeId to, OutboundFrame frame) = 0;

  // The next verified message from any peer; kTimeout if none arrives within `timeout`.
  virtual Result<Message> receive(std::chrono::milliseconds timeout) = 0;

  // The payload limits this transport enforces on what it receives (and send() checks).
  virtual const FrameLimits& limits() const = 0;

  // Moves the accepted round window forward (Verifier::set_round).
  virtual void set_round(std::uint64_t round) = 0;
  // Moves it to `round` even backwards (Verifier::reset_round): after a state transfer only.
  virtual void reset_round(std::uint64_t round) = 0;

  // How often `peer` misbehaved, by kind (all zero for an unknown peer).
  virtual MisbehaviourCounts misbehaviour_counts(NodeId peer) const = 0;

  // Whether `envelope` authenticates `payload` whoever handed it on (a relay): this job, a
  // registered sender whose role may send the type, the length, the sender's signature and the
  // payload digest (Verifier::verify_authentic). Touches no round, replay or equivocation state
  // and counts nothing against anyone: the caller decides what a bad one means.
  virtual Status check_relayed(const SignedEnvelope& envelope, ByteSpan payload) const = 0;
};

}  // namespace ballot::transport
