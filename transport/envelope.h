// Signed envelopes: who sent what, for which job and round, with which sequence number, and a
// digest of the payload, all covered by the sender's Ed25519 signature (hash-then-sign).
//
// Envelope metadata on the wire (kEnvelopeMetaSize = 136 bytes, little-endian), after the frame
// header (transport/frame.h):
//   0  job u64 | 8 sender u32 | 12 role u8 | 13 type u8 | 14 reserved u16 (zero)
//   16 round u64 | 24 sequence u64 | 32 payload_length u64 | 40 payload_digest(payload) [32]
//   72 signature [64]
// payload_digest is the SHA-256 tree over 16 KiB leaves of transport/crypto.h (protocol version
// 2; version 1 signed one plain SHA-256 of the payload). The signature input is the domain label
// "ballot.envelope.v5" plus one zero byte, followed by the first 72 bytes above: label ‖ job ‖
// sender ‖ role ‖ type ‖ round ‖ sequence ‖ payload length ‖ payload digest. Fixed width, so no two different headers
// share a signature input, and the label keeps these signatures from being valid in any other protocol (TLS included).
//
// Thread-safety: free functions are pure; Signer::seal may be called from many threads (the
// sequence counter is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "transport/crypto.h"
#include "transport/frame.h"
#include "transport/identity.h"

namespace ballot::transport {

class SignatureCache;  // transport/signature_cache.h

inline constexpr std::string_view kEnvelopeDomain = "ballot.envelope.v5";
inline constexpr std::size_t kSignedFieldsSize = 72;

struct EnvelopeHeader {
  std::uint64_t job = 0;
  NodeId sender = 0;
  Role role = Role::kNode;
  MessageType type = MessageType::kControl;
  std::uint64_t round = 0;
  std::uint64_t sequence = 0;
  std::uint64_t payload_length = 0;
  Digest payload_digest{};  // payload_digest(payload): the 16 KiB-leaf SHA-256 tree

  bool operator==(const EnvelopeHeader&) const = default;
};

struct SignedEnvelope {
  EnvelopeHeader header;
  Signature signature{};

  bool operator==(const SignedEnvelope&) const = default;
};

// The exact bytes the signature covers (domain label, zero byte, 72 bytes of fields).
std::vector<std::uint8_t> signature_input(const EnvelopeHeader& header);
SignedEnvelope sign_envelope(const EnvelopeHeader& header, const SigningKey& key);
// True iff the signature verifies under `key`. Does not look at any payload.
bool verify_envelope_signature(const SignedEnvelope& envelope, const VerifyKey& key);
// The same through `cache` (transport/signature_cache.h): a triple verified before is not verified
// again.
bool verify_envelope_signature(const SignedEnvelope& envelope, const VerifyKey& key, SignatureCache& cache);

std::array<std::uint8_t, kEnvelopeMetaSize> encode_envelope(const SignedEnvelope& envelope);
// Exactly kEnvelopeMetaSize bytes; checks role, type and reserved bytes (kMalformed otherwise).
Result<SignedEnvelope> decode_envelope(ByteSpan meta);

// A frame ready to send: head = frame header ‖ envelope metadata, then the payload, which is
// shared so that one sealed message can go to many peers without copying or re-signing.
struct OutboundFrame {
  std::vector<std::uint8_t> head;
  std::shared_ptr<const std::vector<std::uint8_t>> payload;  // may be null (empty payload)

  std::size_t size() const noexcept { return head.size() + (payload ? payload->size() : 0); }
  std::vector<std::uint8_t> to_bytes() const;  // head ‖ payload, contiguous
};

// A frame without envelope (flags = 0): for the plaintext benchmark mode only.
OutboundFrame make_unsigned_frame(MessageType type, std::shared_ptr<const std::vector<std::uint8_t>> payload);

// A complete frame parsed from contiguous bytes: the decoder the fuzz target drives and the
// in-memory transport uses. Checks the header against `limits`, that `bytes` holds exactly one
// frame (truncated: kMalformed "truncated"; trailing bytes: kMalformed), the envelope encoding,
// and that the envelope's type and payload length agree with the frame header. It does not check
// the signature or the digest (that is the Verifier's job, with the registry).
struct DecodedFrame {
  FrameHeader header;
  std::optional<SignedEnvelope> envelope;  // present iff the frame is signed
  ByteSpan payload;                        // a view into the decoded bytes
};
Result<DecodedFrame> decode_frame(ByteSpan bytes, const FrameLimits& limits);

// Seals messages of one sender: fills job, sender, role, a fresh sequence number, the digest,
// and signs. Sequence numbers start at the wall clock in microseconds, so that a restarted
// process continues above what it used before instead of replaying low numbers.
class Signer {
 public:
  Signer(SigningKey key, std::uint64_t job, NodeId sender, Role role);

  OutboundFrame seal(MessageType type, std::uint64_t round, std::shared_ptr<const std::vector<std::uint8_t>> payload);
  // The envelope seal() would produce (for tests and proofs); consumes a sequence number.
  SignedEnvelope envelope_for(MessageType type, std::uint64_t round, ByteSpan payload);

  NodeId sender() const noexcept { return sender_; }
  Role role() const noexcept { return role_; }
  std::uint64_t job() const noexcept { return job_; }

 private:
  SigningKey key_;
  std::uint64_t job_;
  NodeId sender_;
  Role role_;
  std::atomic<std::uint64_t> next_sequence_;
};

// Two envelopes from one sender, for one job, round and message type, with different payload
// digests, both validly signed: proof that the sender equivocated. Self-contained (272 bytes):
// anyone holding the sender's public key can check it without the payloads.
struct EquivocationProof {
  SignedEnvelope first;
  SignedEnvelope second;

  std::vector<std::uint8_t> encode() const;
  static Result<EquivocationProof> decode(ByteSpan bytes);
};
// OK iff the proof shows equivocation by a registered sender: same job/sender/role/type/round,
// different digests, both signatures valid under the registry's key for the sender.
Status check_equivocation_proof(const EquivocationProof& proof, const Registry& registry);

// The types of which a sender sends one payload per round (round starts, partition signs, votes,
// decisions, decision pieces): a second, different one is equivocation. Only these make a proof
// (an honest node signs several control frames and vote pieces in a round).
bool one_payload_per_round(MessageType type) noexcept;

}  // namespace ballot::transport
