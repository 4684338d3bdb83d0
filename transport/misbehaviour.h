// What a peer can do wrong, and the observer interface through which the transport reports it
// (robust/ implements the observer to quarantine senders).
//
// Thread-safety: observers are called from I/O threads, concurrently for different sessions;
// an implementation must be thread-safe and must not block for long. It must not throw (an
// exception from an observer is caught and discarded by the transport).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"
#include "transport/envelope.h"
#include "transport/identity.h"

namespace ballot::transport {

enum class Misbehaviour : std::uint8_t {
  kMalformedFrame,    // bad magic, version, type, flags, envelope encoding       -> session closed
  kOversize,          // a length above the configured limit                      -> session closed
  kTruncated,         // the connection ended inside a frame                      -> session closed
  kTimeout,           // a deadline passed inside a frame, handshake or write     -> session closed
  kHandshakeFailed,   // TLS refused: no certificate, other CA, not TLS 1.3...    -> connection closed
  kIdentityMismatch,  // certificate id != claimed id, or envelope sender != peer -> session closed
  kUnknownSender,     // sender or its role not in the pinned registry            -> session closed
  kWrongJob,          // envelope for another job                                 -> frame dropped
  kNotPermitted,      // the sender's role never sends this type (on the header)  -> session closed
  kBadSignature,      // the signature or the payload digest does not verify      -> frame dropped
  kReplay,            // sequence number already seen in this round               -> frame dropped
  kStaleRound,        // a round before the current one                           -> frame dropped
  kFutureRound,       // a round beyond the accepted look-ahead                   -> frame dropped
  kEquivocation,      // a second, different payload for the same round and type  -> frame dropped
  // A second authenticated session claims an id whose session is live: the newcomer is refused
  // (TlsTransportOptions::session_takeover_after). A security event, but no evidence against the
  // id's holder: either process may be the honest one, so it never counts towards quarantine.
  kDuplicateSession,  //                                                          -> newcomer closed
};
inline constexpr std::size_t kMisbehaviourCount = 15;

std::string_view misbehaviour_name(Misbehaviour kind) noexcept;

struct MisbehaviourReport {
  std::optional<NodeId> peer;  // the authenticated peer; absent when it never authenticated
  Misbehaviour kind = Misbehaviour::kMalformedFrame;
  Error error;  // what exactly, for logs
};

class MisbehaviourObserver {
 public:
  virtual ~MisbehaviourObserver() = default;
  virtual void on_misbehaviour(const MisbehaviourReport& report) = 0;
  // Also reported through on_misbehaviour(kEquivocation); this carries the checkable proof.
  virtual void on_equivocation(const EquivocationProof& /*proof*/) {}
};

// Per-peer counts, indexed by Misbehaviour.
using MisbehaviourCounts = std::array<std::uint64_t, kMisbehaviourCount>;

}  // namespace ballot::transport
