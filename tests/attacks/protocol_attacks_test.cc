#include "attacks/protocol_attacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/enforce.h"
#include "transport/memory_transport.h"

namespace ballot::attacks {
namespace {

using namespace std::chrono_literals;
using transport::Misbehaviour;

constexpr MalformedKind kAllKinds[] = {MalformedKind::kBadMagic,      MalformedKind::kBadVersion,
                                       MalformedKind::kUnknownType,   MalformedKind::kUnknownFlags,
                                       MalformedKind::kBadMetaLength, MalformedKind::kNonZeroReserved};

// ---- the decoder directly ------------------------------------------------------------------------

class Malformed : public ::testing::TestWithParam<MalformedKind> {};

TEST_P(Malformed, RejectedByTheHeaderDecoder) {
  const OutboundFrame frame = malformed_frame(GetParam());
  EXPECT_EQ(frame.size(), transport::kFrameHeaderSize);
  const auto bytes = frame.to_bytes();
  auto header = transport::decode_frame_header(bytes, transport::FrameLimits{});
  ASSERT_FALSE(header.ok()) << malformed_kind_name(GetParam());
  EXPECT_EQ(header.error().code, ErrorCode::kMalformed);
  auto decoded = transport::decode_frame(bytes, transport::FrameLimits{});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Malformed, ::testing::ValuesIn(kAllKinds), [](const auto& info) {
  std::string name(malformed_kind_name(info.param));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

TEST(MalformedFrame, RandomFramesAreAlwaysRejectedAndCoverEveryKind) {
  Rng rng(77);
  std::set<std::string> messages;
  for (int i = 0; i < 2000; ++i) {
    const auto bytes = malformed_frame(rng).to_bytes();
    ASSERT_EQ(bytes.size(), transport::kFrameHeaderSize);
    auto header = transport::decode_frame_header(bytes, transport::FrameLimits{});
    ASSERT_FALSE(header.ok()) << i;
    ASSERT_EQ(header.error().code, ErrorCode::kMalformed);
    // The first words of the message name the field ("bad frame magic", "unknown message type", ...).
    messages.insert(header.error().message.substr(0, 12));
  }
  EXPECT_EQ(messages.size(), kMalformedKindCount);
  Rng a(5), b(5);
  EXPECT_EQ(malformed_frame(a).head, malformed_frame(b).head);  // deterministic given rng
}

TEST(OversizedFrame, RejectedBeforeTheBodyForEveryType) {
  const transport::FrameLimits limits;
  for (std::uint8_t t = 1; t < transport::kMessageTypeCount; ++t) {
    const auto type = static_cast<MessageType>(t);
    for (const std::uint64_t claimed : {limits.limit(type) + 1, std::numeric_limits<std::uint64_t>::max()}) {
      const auto bytes = oversized_frame(type, claimed).to_bytes();
      ASSERT_EQ(bytes.size(), transport::kFrameHeaderSize);
      auto header = transport::decode_frame_header(bytes, limits);
      ASSERT_FALSE(header.ok());
      EXPECT_EQ(header.error().code, ErrorCode::kLimitExceeded) << transport::message_type_name(type);
    }
    // At the limit the header itself is valid: only the missing body is wrong.
    const auto at_limit = oversized_frame(type, limits.limit(type)).to_bytes();
    EXPECT_TRUE(transport::decode_frame_header(at_limit, limits).ok());
    EXPECT_EQ(transport::decode_frame(at_limit, limits).error().code, ErrorCode::kMalformed);
  }
}

// ---- through a transport: each misbehaviour is counted, the frame dropped, the session goes on ----

class OverMemoryTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server_key = transport::SigningKey::generate();
    auto node_key = transport::SigningKey::generate();
    ASSERT_TRUE(server_key.ok() && node_key.ok());
    transport::Registry registry;
    ASSERT_TRUE(registry.add(0, transport::Role::kServer, server_key->verify_key()).ok());
    ASSERT_TRUE(registry.add(1, transport::Role::kNode, node_key->verify_key()).ok());
    network_ = transport::MemoryNetwork::create();
    auto server = network_->attach({0, transport::Role::kServer, *server_key}, registry);
    auto node = network_->attach({1, transport::Role::kNode, *node_key}, registry);
    ASSERT_TRUE(server.ok() && node.ok());
    server_ = std::move(server).value();
    node_ = std::move(node).value();
  }

  std::shared_ptr<const std::vector<std::uint8_t>> payload(std::uint8_t fill) {
    return std::make_shared<const std::vector<std::uint8_t>>(100, fill);
  }
  std::uint64_t count(Misbehaviour kind) const {
    return server_->misbehaviour_counts(1)[static_cast<std::size_t>(kind)];
  }
  // After an attack frame, an honest one still arrives: the transport carried on.
  void expect_delivery_still_works(std::uint8_t fill) {
    ASSERT_TRUE(node_->send_frame(0, node_->seal(MessageType::kControl, 0, payload(fill))).ok());
    auto message = server_->receive(1000ms);
    ASSERT_TRUE(message.ok()) << message.error().message;
    EXPECT_EQ(message->payload, *payload(fill));
  }

  std::shared_ptr<transport::MemoryNetwork> network_;
  std::unique_ptr<transport::MemoryTransport> server_, node_;
};

TEST_F(OverMemoryTransport, ForgedSignatureIsRejected) {
  const OutboundFrame honest = node_->seal(MessageType::kVote, 0, payload(1));
  const OutboundFrame forged = forge_signature(honest);
  EXPECT_EQ(forged.size(), honest.size());
  EXPECT_NE(forged.head, honest.head);
  EXPECT_EQ(forged.payload, honest.payload);  // shared, not copied
  (void)node_->send_frame(0, forged);
  EXPECT_EQ(server_->receive(20ms).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(count(Misbehaviour::kBadSignature), 1u);
  expect_delivery_still_works(2);
}

TEST_F(OverMemoryTransport, TamperedPayloadIsRejected) {
  (void)node_->send_frame(0, tamper_payload(node_->seal(MessageType::kVote, 0, payload(3))));
  EXPECT_EQ(server_->receive(20ms).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(count(Misbehaviour::kBadSignature), 1u);
  expect_delivery_still_works(4);
}

TEST_F(OverMemoryTransport, MalformedFramesAreRejected) {
  Rng rng(1);
  for (int i = 0; i < 10; ++i) (void)node_->send_frame(0, malformed_frame(rng));
  for (const MalformedKind kind : kAllKinds) (void)node_->send_frame(0, malformed_frame(kind));
  EXPECT_EQ(server_->receive(20ms).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(count(Misbehaviour::kMalformedFrame), 10u + kMalformedKindCount);
  expect_delivery_still_works(5);
}

TEST_F(OverMemoryTransport, OversizedFramesAreRejected) {
  const auto& limits = server_->limits();
  (void)node_->send_frame(0, oversized_frame(MessageType::kVote, limits.limit(MessageType::kVote) + 1));
  (void)node_->send_frame(0, oversized_frame(MessageType::kStateTransfer, std::numeric_limits<std::uint64_t>::max()));
  EXPECT_EQ(server_->receive(20ms).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(count(Misbehaviour::kOversize), 2u);
  expect_delivery_still_works(6);
}

TEST_F(OverMemoryTransport, TypesTheSendersRoleNeverSendsAreRejectedOnTheHeader) {
  // Signed or not, a node's decision or state transfer is refused by its header alone.
  (void)node_->send_frame(0, node_->seal(MessageType::kDecision, 0, payload(7)));
  (void)node_->send_frame(0, node_->seal(MessageType::kStateTransfer, 0, payload(7)));
  (void)node_->send_frame(0, transport::make_unsigned_frame(MessageType::kStateTransfer, payload(7)));
  EXPECT_EQ(server_->receive(20ms).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(count(Misbehaviour::kNotPermitted), 3u);
  expect_delivery_still_works(8);
}

TEST(ProtocolAttacks, PreconditionsAndNames) {
  OutboundFrame unsigned_frame = transport::make_unsigned_frame(MessageType::kVote, nullptr);
  EXPECT_THROW(forge_signature(unsigned_frame), EnforceError);
  EXPECT_THROW(tamper_payload(unsigned_frame), EnforceError);
  std::set<std::string_view> names;
  for (const MalformedKind kind : kAllKinds) names.insert(malformed_kind_name(kind));
  EXPECT_EQ(names.size(), kMalformedKindCount);
}

}  // namespace
}  // namespace ballot::attacks
