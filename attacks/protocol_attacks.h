// Protocol-domain attacks at the byte level: frames a Byzantine process puts on the wire with
// transport::Transport::send_frame() (which queues bytes as they are; the receiver decodes and
// verifies them like any other frame). Each helper documents how a correct receiver rejects it:
//
//   helper            receiver's reaction (transport/misbehaviour.h)          session
//   forge_signature   Verifier: signature does not verify  → kBadSignature    frame dropped
//   tamper_payload    Verifier: SHA-256(payload) ≠ digest  → kBadSignature    frame dropped
//   malformed_frame   decode_frame_header: kMalformed      → kMalformedFrame  closed
//   oversized_frame   decode_frame_header: kLimitExceeded  → kOversize        closed
//
// The other protocol attacks need no bytes of their own and are the runtime's: crash (stop),
// omission (skip a send), delay (send late), equivocation (seal two different payloads for one
// round: the Verifier yields an EquivocationProof), replay (send_frame an OutboundFrame kept from
// an earlier round: kStaleRound or kReplay), wrong_digest (a model digest that disagrees with the
// server's, in the runtime's own messages).
//
// malformed_frame and oversized_frame are exactly 24 bytes (a header, no body): the receiver
// rejects them after reading the header, before it allocates anything. Pure functions; reentrant.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/rng.h"
#include "transport/envelope.h"
#include "transport/frame.h"

namespace ballot::attacks {

using transport::MessageType;
using transport::OutboundFrame;

// The same frame with one bit of its Ed25519 signature flipped (the payload is not copied; it is
// shared). Precondition (BALLOT_ENFORCE): a signed frame as Transport::seal() makes it.
OutboundFrame forge_signature(OutboundFrame frame);

// The same signed header with one payload byte changed (the payload is copied): the signature is
// valid but covers another digest. Precondition: a signed frame with a non-empty payload.
OutboundFrame tamper_payload(OutboundFrame frame);

// Ways a header can be invalid; each is rejected by transport::decode_frame_header with kMalformed.
enum class MalformedKind : std::uint8_t {
  kBadMagic,         // magic ≠ "BALT"
  kBadVersion,       // version ≠ kProtocolVersion
  kUnknownType,      // type 0 or ≥ kMessageTypeCount
  kUnknownFlags,     // a flag bit other than "signed"
  kBadMetaLength,    // signed but meta_length ≠ kEnvelopeMetaSize (or unsigned with meta)
  kNonZeroReserved,  // reserved bytes 12..15 not zero
};
inline constexpr std::size_t kMalformedKindCount = 6;
std::string_view malformed_kind_name(MalformedKind kind) noexcept;

// A 24-byte frame header that is invalid in the way `kind` says (other fields valid, payload
// length 0, no body).
OutboundFrame malformed_frame(MalformedKind kind);
// One of the kinds above, chosen uniformly by rng, with the offending field's value drawn by rng
// (e.g. any wrong magic, any wrong version).
OutboundFrame malformed_frame(Rng& rng);

// A valid header of `type` that announces `claimed_payload_bytes` of payload, with no body. The
// receiver rejects it when claimed_payload_bytes exceeds its limit for `type` (FrameLimits; e.g.
// pass limits.limit(type) + 1 or UINT64_MAX), before reading or allocating the body.
OutboundFrame oversized_frame(MessageType type, std::uint64_t claimed_payload_bytes);

}  // namespace ballot::attacks
