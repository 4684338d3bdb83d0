#include "transport/envelope.h"

#include <chrono>
#include <cstring>
#include <string>

#include "core/enforce.h"
#include "transport/detail/le.h"

namespace ballot::transport {

using detail::load_le;
using detail::store_le;

namespace {

void store_fields(const EnvelopeHeader& h, std::uint8_t* out) {
  store_le<std::uint64_t>(out + 0, h.job);
  store_le<std::uint32_t>(out + 8, h.sender);
  out[12] = static_cast<std::uint8_t>(h.role);
  out[13] = static_cast<std::uint8_t>(h.type);
  store_le<std::uint16_t>(out + 14, 0);
  store_le<std::uint64_t>(out + 16, h.round);
  store_le<std::uint64_t>(out + 24, h.sequence);
  store_le<std::uint64_t>(out + 32, h.payload_length);
  std::memcpy(out + 40, h.payload_digest.data(), kDigestSize);
}

std::uint64_t initial_sequence() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  return micros > 0 ? static_cast<std::uint64_t>(micros) : 1;
}

}  // namespace

std::vector<std::uint8_t> signature_input(const EnvelopeHeader& header) {
  std::vector<std::uint8_t> input(kEnvelopeDomain.size() + 1 + kSignedFieldsSize);
  std::memcpy(input.data(), kEnvelopeDomain.data(), kEnvelopeDomain.size());
  input[kEnvelopeDomain.size()] = 0;
  store_fields(header, input.data() + kEnvelopeDomain.size() + 1);
  return input;
}

SignedEnvelope sign_envelope(const EnvelopeHeader& header, const SigningKey& key) {
  return SignedEnvelope{header, key.sign(signature_input(header))};
}

bool verify_envelope_signature(const SignedEnvelope& envelope, const VerifyKey& key) {
  return key.verify(signature_input(envelope.header), envelope.signature);
}

std::array<std::uint8_t, kEnvelopeMetaSize> encode_envelope(const SignedEnvelope& envelope) {
  std::array<std::uint8_t, kEnvelopeMetaSize> out{};
  store_fields(envelope.header, out.data());
  std::memcpy(out.data() + kSignedFieldsSize, envelope.signature.data(), kSignatureSize);
  return out;
}

Result<SignedEnvelope> decode_envelope(ByteSpan meta) {
  if (meta.size() != kEnvelopeMetaSize)
    return make_error(ErrorCode::kMalformed, "envelope must be " + std::to_string(kEnvelopeMetaSize) + " bytes, got " +
                                                 std::to_string(meta.size()));
  const std::uint8_t* in = meta.data();
  if (!is_valid_role(in[12])) return make_error(ErrorCode::kMalformed, "unknown role " + std::to_string(in[12]));
  if (!is_valid_message_type(in[13])) return make_error(ErrorCode::kMalformed, "unknown envelope type " + std::to_string(in[13]));
  if (load_le<std::uint16_t>(in + 14) != 0) return make_error(ErrorCode::kMalformed, "reserved envelope bytes are not zero");
  SignedEnvelope envelope;
  EnvelopeHeader& h = envelope.header;
  h.job = load_le<std::uint64_t>(in + 0);
  h.sender = load_le<std::uint32_t>(in + 8);
  h.role = static_cast<Role>(in[12]);
  h.type = static_cast<MessageType>(in[13]);
  h.round = load_le<std::uint64_t>(in + 16);
  h.sequence = load_le<std::uint64_t>(in + 24);
  h.payload_length = load_le<std::uint64_t>(in + 32);
  std::memcpy(h.payload_digest.data(), in + 40, kDigestSize);
  std::memcpy(envelope.signature.data(), in + kSignedFieldsSize, kSignatureSize);
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
  std::vector<std::uint8_t> bytes(2 * kEnvelopeMetaSize);
  const auto a = encode_envelope(first);
  const auto b = encode_envelope(second);
  std::memcpy(bytes.data(), a.data(), kEnvelopeMetaSize);
  std::memcpy(bytes.data() + kEnvelopeMetaSize, b.data(), kEnvelopeMetaSize);
  return bytes;
}

Result<EquivocationProof> EquivocationProof::decode(ByteSpan bytes) {
  if (bytes.size() != 2 * kEnvelopeMetaSize)
    return make_error(ErrorCode::kMalformed, "equivocation proof must be " + std::to_string(2 * kEnvelopeMetaSize) +
                                                 " bytes, got " + std::to_string(bytes.size()));
  BALLOT_ASSIGN_OR_RETURN(SignedEnvelope first, decode_envelope(bytes.first(kEnvelopeMetaSize)));
  BALLOT_ASSIGN_OR_RETURN(SignedEnvelope second, decode_envelope(bytes.subspan(kEnvelopeMetaSize)));
  return EquivocationProof{first, second};
}

Status check_equivocation_proof(const EquivocationProof& proof, const Registry& registry) {
  const EnvelopeHeader& a = proof.first.header;
  const EnvelopeHeader& b = proof.second.header;
  if (a.job != b.job || a.sender != b.sender || a.role != b.role || a.type != b.type || a.round != b.round)
    return make_error(ErrorCode::kInvalidArgument, "envelopes differ in job, sender, role, type or round");
  if (a.payload_digest == b.payload_digest)
    return make_error(ErrorCode::kInvalidArgument, "envelopes carry the same payload digest");
  const RegistryEntry* entry = registry.find(a.sender);
  if (entry == nullptr) return make_error(ErrorCode::kNotFound, "sender is not registered", a.sender);
  if (entry->role != a.role) return make_error(ErrorCode::kAuthentication, "sender's role differs from its registration", a.sender);
  if (!verify_envelope_signature(proof.first, entry->key) || !verify_envelope_signature(proof.second, entry->key))
    return make_error(ErrorCode::kAuthentication, "a signature of the proof does not verify", a.sender);
  return {};
}

}  // namespace ballot::transport
