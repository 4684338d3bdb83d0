#include "transport/envelope.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace ballot::transport {
namespace {

std::shared_ptr<const std::vector<std::uint8_t>> payload_of(std::size_t n, std::uint8_t seed = 1) {
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(n);
  for (std::size_t i = 0; i < n; ++i) (*bytes)[i] = static_cast<std::uint8_t>(seed + i * 31);
  return bytes;
}

class EnvelopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = SigningKey::generate().value();
    signer_ = std::make_unique<Signer>(key_, 42, 3, Role::kNode);
  }
  SigningKey key_;
  std::unique_ptr<Signer> signer_;
};

TEST_F(EnvelopeTest, SealDecodeVerify) {
  const auto payload = payload_of(1000);
  const OutboundFrame frame = signer_->seal(MessageType::kVote, 7, payload);
  EXPECT_EQ(frame.head.size(), kFrameHeaderSize + kEnvelopeMetaSize);
  const auto bytes = frame.to_bytes();
  auto decoded = decode_frame(bytes, FrameLimits{});
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  ASSERT_TRUE(decoded->envelope.has_value());
  const EnvelopeHeader& h = decoded->envelope->header;
  EXPECT_EQ(h.job, 42u);
  EXPECT_EQ(h.sender, 3u);
  EXPECT_EQ(h.role, Role::kNode);
  EXPECT_EQ(h.type, MessageType::kVote);
  EXPECT_EQ(h.round, 7u);
  EXPECT_EQ(h.payload_length, 1000u);
  EXPECT_EQ(h.payload_digest, payload_digest(*payload));
  EXPECT_TRUE(std::equal(decoded->payload.begin(), decoded->payload.end(), payload->begin(), payload->end()));
  EXPECT_TRUE(verify_envelope_signature(*decoded->envelope, key_.verify_key()));
}

TEST_F(EnvelopeTest, SequencesIncrease) {
  const auto a = signer_->envelope_for(MessageType::kControl, 0, {});
  const auto b = signer_->envelope_for(MessageType::kControl, 0, {});
  EXPECT_EQ(b.header.sequence, a.header.sequence + 1);
  EXPECT_GT(a.header.sequence, 1'600'000'000'000'000ull);  // wall clock in microseconds
}

TEST_F(EnvelopeTest, SignatureInputLayout) {
  EnvelopeHeader h;
  h.job = 0x0102030405060708ull;
  h.sender = 0x0a0b0c0d;
  h.role = Role::kServer;
  h.type = MessageType::kDecision;
  h.round = 9;
  h.sequence = 10;
  h.payload_length = 11;
  h.payload_digest.fill(0xee);
  const auto input = signature_input(h);
  ASSERT_EQ(input.size(), kEnvelopeDomain.size() + 1 + kSignedFieldsSize);
  EXPECT_EQ(std::string(input.begin(), input.begin() + kEnvelopeDomain.size()), "ballot.envelope.v5");
  const std::uint8_t* f = input.data() + kEnvelopeDomain.size() + 1;
  EXPECT_EQ(input[kEnvelopeDomain.size()], 0);
  EXPECT_EQ(f[0], 0x08);  // job, little-endian
  EXPECT_EQ(f[7], 0x01);
  EXPECT_EQ(f[8], 0x0d);   // sender
  EXPECT_EQ(f[12], 1);     // role server
  EXPECT_EQ(f[13], 5);     // type result
  EXPECT_EQ(f[16], 9);     // round
  EXPECT_EQ(f[24], 10);    // sequence
  EXPECT_EQ(f[32], 11);    // payload length
  EXPECT_EQ(f[40], 0xee);  // digest
  // The encoded envelope carries the same 72 bytes, then the signature.
  const SignedEnvelope signed_envelope = sign_envelope(h, key_);
  const auto meta = encode_envelope(signed_envelope);
  EXPECT_EQ(0, std::memcmp(meta.data(), f, kSignedFieldsSize));
  EXPECT_EQ(decode_envelope(meta).value(), signed_envelope);
}

// Version 1 signed "ballot.envelope.v1" over a plain SHA-256 of the payload. Such an envelope
// (e.g. replayed from an old deployment) fails under version 5: other label, other digest.
TEST_F(EnvelopeTest, VersionOneEnvelopeDoesNotVerify) {
  const auto payload = payload_of(3 * kPayloadLeafSize + 5);
  SignedEnvelope old = signer_->envelope_for(MessageType::kVote, 3, *payload);
  old.header.payload_digest = sha256(*payload);
  std::vector<std::uint8_t> input = signature_input(old.header);
  const std::string_view v1 = "ballot.envelope.v1";
  std::memcpy(input.data(), v1.data(), v1.size());
  old.signature = key_.sign(input);
  EXPECT_FALSE(verify_envelope_signature(old, key_.verify_key()));
  EXPECT_NE(old.header.payload_digest, payload_digest(*payload));
}

// Versions 2 to 4 signed "ballot.envelope.v2" to "…v4" over the same tree digest: version 2's
// decisions had no η and λ, version 3's fp32 decisions no form byte, version 4 chained the state
// digest over a sparse direction's d floats. Replayed into a version-5 cluster, such an envelope
// fails at its label.
TEST_F(EnvelopeTest, VersionTwoToFourEnvelopesDoNotVerify) {
  const auto payload = payload_of(kPayloadLeafSize + 9);
  for (const std::string_view label : {"ballot.envelope.v2", "ballot.envelope.v3", "ballot.envelope.v4"}) {
    SignedEnvelope old = signer_->envelope_for(MessageType::kDecision, 4, *payload);
    std::vector<std::uint8_t> input = signature_input(old.header);
    std::memcpy(input.data(), label.data(), label.size());
    old.signature = key_.sign(input);
    EXPECT_FALSE(verify_envelope_signature(old, key_.verify_key())) << label;
    EXPECT_EQ(old.header.payload_digest, payload_digest(*payload));
  }
}

TEST_F(EnvelopeTest, EveryFieldIsCovered) {
  const SignedEnvelope original = signer_->envelope_for(MessageType::kVote, 3, std::vector<std::uint8_t>{1, 2, 3});
  ASSERT_TRUE(verify_envelope_signature(original, key_.verify_key()));
  const auto meta = encode_envelope(original);
  // Flip every bit of the signed fields (and the signature); decoding may refuse, and whatever
  // decodes must not verify.
  for (std::size_t bit = 0; bit < 8 * kEnvelopeMetaSize; ++bit) {
    auto tampered = meta;
    tampered[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    auto decoded = decode_envelope(tampered);
    if (decoded.ok()) {
      EXPECT_FALSE(verify_envelope_signature(*decoded, key_.verify_key())) << "bit " << bit;
    }
  }
}

TEST_F(EnvelopeTest, DecodeFrameRejectsInconsistency) {
  const OutboundFrame frame = signer_->seal(MessageType::kVote, 1, payload_of(64));
  auto bytes = frame.to_bytes();
  // Truncated anywhere: an error, never a read past the end.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = decode_frame(ByteSpan(bytes).first(n), FrameLimits{});
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(decode_frame(longer, FrameLimits{}).error().code, ErrorCode::kMalformed);
  auto other_type = bytes;
  other_type[kFrameHeaderSize + 13] = static_cast<std::uint8_t>(MessageType::kPartitionSigns);
  EXPECT_EQ(decode_frame(other_type, FrameLimits{}).error().code, ErrorCode::kMalformed);
  auto other_length = bytes;
  other_length[kFrameHeaderSize + 32] ^= 1;
  EXPECT_EQ(decode_frame(other_length, FrameLimits{}).error().code, ErrorCode::kMalformed);
  auto bad_role = bytes;
  bad_role[kFrameHeaderSize + 12] = 9;
  EXPECT_EQ(decode_frame(bad_role, FrameLimits{}).error().code, ErrorCode::kMalformed);
}

TEST_F(EnvelopeTest, UnsignedFrame) {
  const auto frame = make_unsigned_frame(MessageType::kPartitionSigns, payload_of(10));
  auto decoded = decode_frame(frame.to_bytes(), FrameLimits{});
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->envelope.has_value());
  EXPECT_EQ(decoded->payload.size(), 10u);
}

TEST_F(EnvelopeTest, EquivocationProofIsCheckable) {
  Registry registry;
  ASSERT_TRUE(registry.add(3, Role::kNode, key_.verify_key()).ok());
  const auto a = signer_->envelope_for(MessageType::kPartitionSigns, 5, *payload_of(100, 1));
  const auto b = signer_->envelope_for(MessageType::kPartitionSigns, 5, *payload_of(100, 2));
  const EquivocationProof proof{a, b};
  EXPECT_TRUE(check_equivocation_proof(proof, registry).ok());
  auto decoded = EquivocationProof::decode(proof.encode());
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(check_equivocation_proof(*decoded, registry).ok());
  EXPECT_FALSE(EquivocationProof::decode(ByteSpan(proof.encode()).first(200)).ok());

  // Not proofs: same digest, different rounds, a forged signature, an unknown sender.
  const auto same = signer_->envelope_for(MessageType::kPartitionSigns, 5, *payload_of(100, 1));
  EXPECT_FALSE(check_equivocation_proof({a, same}, registry).ok());
  const auto other_round = signer_->envelope_for(MessageType::kPartitionSigns, 6, *payload_of(100, 2));
  EXPECT_FALSE(check_equivocation_proof({a, other_round}, registry).ok());
  EquivocationProof forged{a, b};
  forged.second.signature[0] ^= 1;
  EXPECT_EQ(check_equivocation_proof(forged, registry).error().code, ErrorCode::kAuthentication);
  EXPECT_EQ(check_equivocation_proof(proof, Registry{}).error().code, ErrorCode::kNotFound);
  // Two control frames or vote pieces of one round are what an honest node signs: no proof.
  for (const MessageType type : {MessageType::kControl, MessageType::kVotePiece, MessageType::kStateTransfer}) {
    const EquivocationProof honest{signer_->envelope_for(type, 5, *payload_of(100, 1)),
                                   signer_->envelope_for(type, 5, *payload_of(100, 2))};
    EXPECT_FALSE(check_equivocation_proof(honest, registry).ok()) << static_cast<int>(type);
  }
}

}  // namespace
}  // namespace ballot::transport
