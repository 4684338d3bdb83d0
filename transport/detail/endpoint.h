// Internal: what every Transport implementation shares — sealing, the receive path (decode,
// verify, count, report, deliver), the bounded inbox and the per-peer misbehaviour counts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "transport/envelope.h"
#include "transport/transport.h"
#include "transport/verifier.h"

namespace ballot::transport::detail {

// Does this kind of misbehaviour end the session (framing lost or peer not trustworthy at all)?
bool closes_session(Misbehaviour kind) noexcept;

class EndpointCore {
 public:
  EndpointCore(LocalIdentity self, Registry registry, const TransportOptions& options, bool require_signatures);

  NodeId self() const noexcept { return signer_.sender(); }
  const TransportOptions& options() const noexcept { return options_; }
  const Verifier& verifier() const noexcept { return verifier_; }
  Verifier& verifier() noexcept { return verifier_; }
  bool require_signatures() const noexcept { return require_signatures_; }

  OutboundFrame seal(MessageType type, std::uint64_t round, std::shared_ptr<const std::vector<std::uint8_t>> payload);
  // The frame a session opens with: a signed Hello (or, unsigned mode, the id in 4 bytes).
  OutboundFrame hello();

  // Checks one complete frame that arrived on the session of the authenticated `peer` and, if it
  // passes, delivers it. Returns the misbehaviour (already counted and reported) otherwise.
  // `computed`, if given, is payload_digest(payload), already computed by the caller (the TLS
  // session hashes the payload while it arrives).
  std::optional<Misbehaviour> accept(NodeId peer, const FrameHeader& header, ByteSpan meta, PayloadBytes payload,
                                     const Digest* computed = nullptr);
  // The same from contiguous bytes (the in-memory transport): also classifies framing errors.
  std::optional<Misbehaviour> accept_bytes(NodeId peer, ByteSpan bytes);
  // Whether `peer`'s registered role may send `type` (role_may_send), checked on a frame's header
  // before its payload is read: a peer cannot make this end buffer a frame it may never send.
  Status permits(NodeId peer, MessageType type) const;

  void report(std::optional<NodeId> peer, Misbehaviour kind, Error error);
  MisbehaviourCounts counts(NodeId peer) const;

  // Inbox: bounded by options.max_inbox_bytes (a producer checks has_space() before reading the
  // next frame, so it overshoots by at most one frame per producer).
  bool has_space() const;
  // Calls `resume` once, from the consumer's thread, when space frees up.
  void when_space(std::function<void()> resume);
  bool wait_for_space(std::chrono::steady_clock::time_point deadline);
  Result<Message> pop(std::chrono::milliseconds timeout);
  void close_inbox();  // wakes waiting consumers with kUnavailable

 private:
  void push(Message message);

  Signer signer_;
  Verifier verifier_;
  TransportOptions options_;
  bool require_signatures_;

  mutable std::mutex counts_mutex_;  // leaf lock
  std::map<NodeId, MisbehaviourCounts> counts_;

  mutable std::mutex inbox_mutex_;  // leaf lock; callbacks run after releasing it
  std::condition_variable inbox_ready_;
  std::condition_variable inbox_space_;
  std::deque<Message> inbox_;
  std::size_t inbox_bytes_ = 0;
  bool inbox_closed_ = false;
  std::vector<std::function<void()>> waiting_for_space_;
};

}  // namespace ballot::transport::detail
