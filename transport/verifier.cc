#include "transport/verifier.h"

#include <string>

#include "transport/signature_cache.h"

namespace ballot::transport {

namespace {

Verdict reject(Misbehaviour kind, ErrorCode code, std::string message, NodeId peer) {
  Verdict verdict;
  verdict.status = make_error(code, std::move(message), peer);
  verdict.kind = kind;
  return verdict;
}

}  // namespace

std::string_view misbehaviour_name(Misbehaviour kind) noexcept {
  switch (kind) {
    case Misbehaviour::kMalformedFrame:
      return "malformed-frame";
    case Misbehaviour::kOversize:
      return "oversize";
    case Misbehaviour::kTruncated:
      return "truncated";
    case Misbehaviour::kTimeout:
      return "timeout";
    case Misbehaviour::kHandshakeFailed:
      return "handshake-failed";
    case Misbehaviour::kIdentityMismatch:
      return "identity-mismatch";
    case Misbehaviour::kUnknownSender:
      return "unknown-sender";
    case Misbehaviour::kWrongJob:
      return "wrong-job";
    case Misbehaviour::kNotPermitted:
      return "not-permitted";
    case Misbehaviour::kBadSignature:
      return "bad-signature";
    case Misbehaviour::kReplay:
      return "replay";
    case Misbehaviour::kStaleRound:
      return "stale-round";
    case Misbehaviour::kFutureRound:
      return "future-round";
    case Misbehaviour::kEquivocation:
      return "equivocation";
    case Misbehaviour::kDuplicateSession:
      return "duplicate-session";
  }
  return "unknown";
}

bool role_may_send(Role role, MessageType type) noexcept {
  switch (type) {
    case MessageType::kRoundStart:
    case MessageType::kDecision:
    case MessageType::kStateTransfer:
      return role == Role::kServer;
    case MessageType::kPartitionSigns:
    case MessageType::kVote:
    case MessageType::kVotePiece:
      return role == Role::kNode;
    case MessageType::kHello:
    case MessageType::kControl:
    case MessageType::kDecisionPiece:  // the server's pieces, relayed by the nodes
      return true;
  }
  return false;
}

Verifier::Verifier(Registry registry, VerifierOptions options) : registry_(std::move(registry)), options_(options) {}

Verdict Verifier::verify_authentic(const SignedEnvelope& envelope, ByteSpan payload,
                                   std::optional<NodeId> authenticated_peer) const {
  return check_authentic(envelope, payload, nullptr, authenticated_peer);
}

Verdict Verifier::verify_authentic(const SignedEnvelope& envelope, ByteSpan payload, const Digest& computed,
                                   std::optional<NodeId> authenticated_peer) const {
  return check_authentic(envelope, payload, &computed, authenticated_peer);
}

Verdict Verifier::verify(const SignedEnvelope& envelope, ByteSpan payload, std::optional<NodeId> authenticated_peer) {
  Verdict verdict = check_authentic(envelope, payload, nullptr, authenticated_peer);
  if (!verdict.ok()) return verdict;
  return check_fresh(envelope);
}

Verdict Verifier::verify(const SignedEnvelope& envelope, ByteSpan payload, const Digest& computed,
                         std::optional<NodeId> authenticated_peer) {
  Verdict verdict = check_authentic(envelope, payload, &computed, authenticated_peer);
  if (!verdict.ok()) return verdict;
  return check_fresh(envelope);
}

Verdict Verifier::check_authentic(const SignedEnvelope& envelope, ByteSpan payload, const Digest* computed,
                                  std::optional<NodeId> authenticated_peer) const {
  const EnvelopeHeader& h = envelope.header;
  // Blame the authenticated peer when there is one: the envelope's sender field is not yet
  // authentic and must not let one peer get another counted.
  const NodeId blame = authenticated_peer.value_or(h.sender);
  if (authenticated_peer && *authenticated_peer != h.sender)
    return reject(Misbehaviour::kIdentityMismatch, ErrorCode::kAuthentication,
                  "envelope claims sender " + std::to_string(h.sender) + " on the session of node " +
                      std::to_string(*authenticated_peer),
                  blame);
  const RegistryEntry* entry = registry_.find(h.sender);
  if (entry == nullptr)
    return reject(Misbehaviour::kUnknownSender, ErrorCode::kAuthentication,
                  "sender " + std::to_string(h.sender) + " is not in the registry", blame);
  if (entry->role != h.role)
    return reject(Misbehaviour::kUnknownSender, ErrorCode::kAuthentication,
                  "sender " + std::to_string(h.sender) + " claims role " + std::string(role_name(h.role)) +
                      " but is registered as " + std::string(role_name(entry->role)),
                  blame);
  if (h.job != options_.job)
    return reject(Misbehaviour::kWrongJob, ErrorCode::kAuthentication,
                  "envelope for job " + std::to_string(h.job) + ", expected " + std::to_string(options_.job), blame);
  if (!role_may_send(h.role, h.type))
    return reject(Misbehaviour::kNotPermitted, ErrorCode::kAuthentication,
                  std::string(role_name(h.role)) + " may not send " + std::string(message_type_name(h.type)), blame);
  if (h.payload_length != payload.size())
    return reject(Misbehaviour::kMalformedFrame, ErrorCode::kMalformed,
                  "envelope announces " + std::to_string(h.payload_length) + " payload bytes, frame holds " +
                      std::to_string(payload.size()),
                  blame);
  if (!(options_.signature_cache ? verify_envelope_signature(envelope, entry->key, *options_.signature_cache)
                                 : verify_envelope_signature(envelope, entry->key)))
    return reject(Misbehaviour::kBadSignature, ErrorCode::kAuthentication, "envelope signature does not verify", blame);
  // Only now, for a correctly signed header, is the payload worth hashing.
  if ((computed != nullptr ? *computed : payload_digest(payload)) != h.payload_digest)
    return reject(Misbehaviour::kBadSignature, ErrorCode::kAuthentication,
                  "payload does not match the signed payload digest", blame);
  return Verdict{};
}

Verdict Verifier::check_fresh(const SignedEnvelope& envelope) {
  const EnvelopeHeader& h = envelope.header;
  std::lock_guard<std::mutex> lock(mutex_);
  const bool round_free = options_.round_free.test(static_cast<std::size_t>(h.type));
  if (!round_free && h.round < round_)
    return reject(Misbehaviour::kStaleRound, ErrorCode::kReplay,
                  "envelope for round " + std::to_string(h.round) + " while at round " + std::to_string(round_),
                  h.sender);
  // round_ <= h.round here, so the subtraction cannot wrap.
  if (!round_free && h.round - round_ > options_.rounds_ahead)
    return reject(Misbehaviour::kFutureRound, ErrorCode::kReplay,
                  "envelope for round " + std::to_string(h.round) + " while at round " + std::to_string(round_),
                  h.sender);
  Window& window = windows_[{h.sender, round_free ? kRoundFreeKey : h.round}];
  bool fresh = false;
  std::uint64_t shift = 0;
  if (!window.any || h.sequence > window.highest) {
    fresh = true;
    shift = window.any ? h.sequence - window.highest : 64;
  } else {
    const std::uint64_t age = window.highest - h.sequence;
    fresh = age < 64 && (window.seen & (std::uint64_t{1} << age)) == 0;
  }
  if (!fresh)
    return reject(
        Misbehaviour::kReplay, ErrorCode::kReplay,
        "sequence " + std::to_string(h.sequence) + " already seen (or too old) in round " + std::to_string(h.round),
        h.sender);
  if (options_.one_per_round.test(static_cast<std::size_t>(h.type))) {
    const auto key = std::make_tuple(h.sender, h.round, h.type);
    const auto it = first_.find(key);
    if (it != first_.end() && it->second.header.payload_digest != h.payload_digest) {
      Verdict equivocation =
          reject(Misbehaviour::kEquivocation, ErrorCode::kAuthentication,
                 "second, different " + std::string(message_type_name(h.type)) + " in round " + std::to_string(h.round),
                 h.sender);
      equivocation.proof = EquivocationProof{it->second, envelope};
      return equivocation;
    }
    if (it == first_.end()) first_.emplace(key, envelope);
  }
  // Commit the sequence only now that the frame is accepted.
  if (h.sequence > window.highest || !window.any) {
    window.seen = shift >= 64 ? 0 : window.seen << shift;
    window.seen |= 1;
    window.highest = h.sequence;
    window.any = true;
  } else {
    window.seen |= std::uint64_t{1} << (window.highest - h.sequence);
  }
  return Verdict{};
}

void Verifier::set_round(std::uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (round <= round_) return;
  round_ = round;
  // kRoundFreeKey is the largest key, so the round-free windows are never erased here.
  std::erase_if(windows_, [&](const auto& item) { return item.first.second < round; });
  std::erase_if(first_, [&](const auto& item) { return std::get<1>(item.first) < round; });
}

void Verifier::reset_round(std::uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  round_ = round;
  std::erase_if(windows_, [&](const auto& item) { return item.first.second != kRoundFreeKey; });
  first_.clear();
}

void Verifier::forget_sequences(NodeId sender) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(windows_, [&](const auto& item) { return item.first.first == sender; });
}

std::uint64_t Verifier::round() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return round_;
}

}  // namespace ballot::transport
