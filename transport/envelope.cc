#include "transport/envelope.h"

#include <chrono>
#include <cstring>
#include <string>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "transport/signature_cache.h"

namespace ballot::transport {

namespace {

// The signed fields, in wire order (kSignedFieldsSize bytes).
void put_fields(const EnvelopeHeader& h, ByteWriter& out) {
  out.put<std::uint64_t>(h.job)
      .put<std::uint32_t>(h.sender)
      .put<std::uint8_t>(static_cast<std::uint8_t>(h.role))
      .put<std::uint8_t>(static_cast<std::uint8_t>(h.type))
      .put<std::uint16_t>(0)  // reserved
      .put<std::uint64_t>(h.round)
      .put<std::uint64_t>(h.sequence)
      .put<std::uint64_t>(h.payload_length)
      .put_bytes(h.payload_digest);
}

std::uint64_t initial_sequence() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  return micros > 0 ? static_cast<std::uint64_t>(micros) : 1;
}

}  // namespace

std::vector<std::uint8_t> signature_input(const EnvelopeHeader& header) {
  ByteWriter input;
  input.bytes().reserve(kEnvelopeDomain.size() + 1 + kSignedFieldsSize);
  input.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(kEnvelopeDomain.data()), kEnvelopeDomain.size()))
      .put<std::uint8_t>(0);
  put_fields(header, input);
  return input.take();
}

SignedEnvelope sign_envelope(const EnvelopeHeader& header, const SigningKey& key) {
  return SignedEnvelope{header, key.sign(signature_input(header))};
}

bool verify_envelope_signature(const SignedEnvelope& envelope, const VerifyKey& key) {
  return key.verify(signature_input(envelope.header), envelope.signature);
}

bool verify_envelope_signature(const SignedEnvelope& envelope, const VerifyKey& key, SignatureCache& cache) {
  return cache.verify(key, signature_input(envelope.header), envelope.signature);
}

std::array<std::uint8_t, kEnvelopeMetaSize> encode_envelope(const SignedEnvelope& envelope) {
  ByteWriter writer;
  writer.bytes().reserve(kEnvelopeMetaSize);
  put_fields(envelope.header, writer);
  writer.put_bytes(envelope.signature);
  std::array<std::uint8_t, kEnvelopeMetaSize> out{};
  std::memcpy(out.data(), writer.bytes().data(), kEnvelopeMetaSize);
  return out;
}

Result<SignedEnvelope> decode_envelope(ByteSpan meta) {
  if (meta.size() != kEnvelopeMetaSize)
    return make_error(ErrorCode::kMalformed, "envelope must be " + std::to_string(kEnvelopeMetaSize) + " bytes, got " +
                                                 std::to_string(meta.size()));
  // The length was checked above: the reads below cannot fail (and would return, never throw).
  ByteReader reader(meta, "envelope");
  SignedEnvelope envelope;
  EnvelopeHeader& h = envelope.header;
  BALLOT_ASSIGN_OR_RETURN(h.job, reader.read<std::uint64_t>("job"));
  BALLOT_ASSIGN_OR_RETURN(h.sender, reader.read<std::uint32_t>("sender"));
  BALLOT_ASSIGN_OR_RETURN(const auto role, reader.read<std::uint8_t>("role"));
  BALLOT_ASSIGN_OR_RETURN(const auto type, reader.read<std::uint8_t>("type"));
  BALLOT_ASSIGN_OR_RETURN(const auto reserved, reader.read<std::uint16_t>("reserved"));
  if (!is_valid_role(role)) return make_error(ErrorCode::kMalformed, "unknown role " + std::to_string(role));
  if (!is_valid_message_type(type))
    return make_error(ErrorCode::kMalformed, "unknown envelope type " + std::to_string(type));
  if (reserved != 0) return make_error(ErrorCode::kMalformed, "reserved envelope bytes are not zero");
  h.role = static_cast<Role>(role);
  h.type = static_cast<MessageType>(type);
  BALLOT_ASSIGN_OR_RETURN(h.round, reader.read<std::uint64_t>("round"));
  BALLOT_ASSIGN_OR_RETURN(h.sequence, reader.read<std::uint64_t>("sequence"));
  BALLOT_ASSIGN_OR_RETURN(h.payload_length, reader.read<std::uint64_t>("payload length"));
  BALLOT_ASSIGN_OR_RETURN(const auto digest, reader.take_bytes(kDigestSize, "payload digest"));
  std::memcpy(h.payload_digest.data(), digest.data(), kDigestSize);
  BALLOT_ASSIGN_OR_RETURN(const auto signature, reader.take_bytes(kSignatureSize, "signature"));
  std::memcpy(envelope.signature.data(), signature.data(), kSignatureSize);
  return envelope;
}

std::vector<std::uint8_t> OutboundFrame::to_bytes() const {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(size());
  bytes.insert(bytes.end(), head.begin(), head.end());
  if (payload) bytes.insert(bytes.end(), payload->begin(), payload->end());
  return bytes;
}

OutboundFrame make_unsigned_frame(MessageType type, std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  FrameHeader header;
  header.type = type;
  header.payload_length = payload ? payload->size() : 0;
  const auto encoded = encode_frame_header(header);
  return OutboundFrame{std::vector<std::uint8_t>(encoded.begin(), encoded.end()), std::move(payload)};
}

Result<DecodedFrame> decode_frame(ByteSpan bytes, const FrameLimits& limits) {
  if (bytes.size() < kFrameHeaderSize)
    return make_error(ErrorCode::kMalformed, "truncated frame: " + std::to_string(bytes.size()) + " of " +
                                                 std::to_string(kFrameHeaderSize) + " header bytes");
  BALLOT_ASSIGN_OR_RETURN(FrameHeader header, decode_frame_header(bytes.first(kFrameHeaderSize), limits));
  // Each term compared separately against what remains: no sum of peer-controlled values.
  const std::size_t available = bytes.size() - kFrameHeaderSize;
  if (header.meta_length > available || header.payload_length > available - header.meta_length)
    return make_error(ErrorCode::kMalformed, "truncated frame: body of " + std::to_string(header.body_length()) +
                                                 " bytes announced, " + std::to_string(available) + " present");
  if (header.payload_length < available - header.meta_length)
    return make_error(ErrorCode::kMalformed, "trailing bytes after frame");
  DecodedFrame frame;
  frame.header = header;
  const ByteSpan body = bytes.subspan(kFrameHeaderSize);
  if (header.is_signed()) {
    BALLOT_ASSIGN_OR_RETURN(SignedEnvelope envelope, decode_envelope(body.first(header.meta_length)));
    if (envelope.header.type != header.type)
      return make_error(ErrorCode::kMalformed, "envelope type differs from frame type");
    if (envelope.header.payload_length != header.payload_length)
      return make_error(ErrorCode::kMalformed, "envelope payload length differs from frame payload length");
    frame.envelope = envelope;
  }
  frame.payload = body.subspan(header.meta_length);
  return frame;
}

Signer::Signer(SigningKey key, std::uint64_t job, NodeId sender, Role role)
    : key_(std::move(key)), job_(job), sender_(sender), role_(role), next_sequence_(initial_sequence()) {}

SignedEnvelope Signer::envelope_for(MessageType type, std::uint64_t round, ByteSpan payload) {
  EnvelopeHeader header;
  header.job = job_;
  header.sender = sender_;
  header.role = role_;
  header.type = type;
  header.round = round;
  header.sequence = next_sequence_.fetch_add(1, std::memory_order_relaxed);
  header.payload_length = payload.size();
  header.payload_digest = payload_digest(payload);
  return sign_envelope(header, key_);
}

OutboundFrame Signer::seal(MessageType type, std::uint64_t round,
                           std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  const ByteSpan bytes = payload ? ByteSpan(*payload) : ByteSpan();
  const SignedEnvelope envelope = envelope_for(type, round, bytes);
  FrameHeader header;
  header.type = type;
  header.flags = kFrameFlagSigned;
  header.meta_length = kEnvelopeMetaSize;
  header.payload_length = bytes.size();
  OutboundFrame frame;
  frame.head.resize(kFrameHeaderSize + kEnvelopeMetaSize);
  const auto encoded_header = encode_frame_header(header);
  const auto encoded_envelope = encode_envelope(envelope);
  std::memcpy(frame.head.data(), encoded_header.data(), kFrameHeaderSize);
  std::memcpy(frame.head.data() + kFrameHeaderSize, encoded_envelope.data(), kEnvelopeMetaSize);
  frame.payload = std::move(payload);
  return frame;
}

std::vector<std::uint8_t> EquivocationProof::encode() const {
  ByteWriter out;
  out.bytes().reserve(2 * kEnvelopeMetaSize);
  out.put_bytes(encode_envelope(first)).put_bytes(encode_envelope(second));
  return out.take();
}

Result<EquivocationProof> EquivocationProof::decode(ByteSpan bytes) {
  if (bytes.size() != 2 * kEnvelopeMetaSize)
    return make_error(ErrorCode::kMalformed, "equivocation proof must be " + std::to_string(2 * kEnvelopeMetaSize) +
                                                 " bytes, got " + std::to_string(bytes.size()));
  ByteReader reader(bytes, "equivocation proof");
  BALLOT_ASSIGN_OR_RETURN(const auto first_meta, reader.take_bytes(kEnvelopeMetaSize, "first envelope"));
  BALLOT_ASSIGN_OR_RETURN(const auto second_meta, reader.take_bytes(kEnvelopeMetaSize, "second envelope"));
  BALLOT_ASSIGN_OR_RETURN(SignedEnvelope first, decode_envelope(first_meta));
  BALLOT_ASSIGN_OR_RETURN(SignedEnvelope second, decode_envelope(second_meta));
  return EquivocationProof{first, second};
}

bool one_payload_per_round(MessageType type) noexcept {
  switch (type) {
    case MessageType::kRoundStart:
    case MessageType::kPartitionSigns:
    case MessageType::kVote:
    case MessageType::kDecision:
    case MessageType::kDecisionPiece:
      return true;
    default:
      return false;
  }
}

Status check_equivocation_proof(const EquivocationProof& proof, const Registry& registry) {
  const EnvelopeHeader& a = proof.first.header;
  const EnvelopeHeader& b = proof.second.header;
  if (a.job != b.job || a.sender != b.sender || a.role != b.role || a.type != b.type || a.round != b.round)
    return make_error(ErrorCode::kInvalidArgument, "envelopes differ in job, sender, role, type or round");
  if (a.payload_digest == b.payload_digest)
    return make_error(ErrorCode::kInvalidArgument, "envelopes carry the same payload digest");
  if (!one_payload_per_round(a.type))
    return make_error(ErrorCode::kInvalidArgument, "a sender may sign several payloads of this type in a round");
  const RegistryEntry* entry = registry.find(a.sender);
  if (entry == nullptr) return make_error(ErrorCode::kNotFound, "sender is not registered", a.sender);
  if (entry->role != a.role)
    return make_error(ErrorCode::kAuthentication, "sender's role differs from its registration", a.sender);
  if (!verify_envelope_signature(proof.first, entry->key) || !verify_envelope_signature(proof.second, entry->key))
    return make_error(ErrorCode::kAuthentication, "a signature of the proof does not verify", a.sender);
  return {};
}

}  // namespace ballot::transport
