#include "transport/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace ballot::transport {
namespace {

std::vector<std::uint8_t> header_bytes(const FrameHeader& header) {
  const auto encoded = encode_frame_header(header);
  return {encoded.begin(), encoded.end()};
}

FrameHeader signed_header(MessageType type, std::uint64_t payload) {
  FrameHeader header;
  header.type = type;
  header.flags = kFrameFlagSigned;
  header.meta_length = kEnvelopeMetaSize;
  header.payload_length = payload;
  return header;
}

TEST(FrameHeader, RoundTrip) {
  const FrameHeader header = signed_header(MessageType::kVote, 1'400'000);
  const auto bytes = header_bytes(header);
  ASSERT_EQ(bytes.size(), kFrameHeaderSize);
  EXPECT_EQ(bytes[0], 'B');
  EXPECT_EQ(bytes[1], 'A');
  EXPECT_EQ(bytes[2], 'L');
  EXPECT_EQ(bytes[3], 'T');
  auto decoded = decode_frame_header(bytes, FrameLimits{});
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->type, MessageType::kVote);
  EXPECT_TRUE(decoded->is_signed());
  EXPECT_EQ(decoded->payload_length, 1'400'000u);
  EXPECT_EQ(decoded->body_length(), 1'400'000u + kEnvelopeMetaSize);
}

struct Corruption {
  const char* name;
  std::size_t offset;
  std::vector<std::uint8_t> bytes;
  ErrorCode expected;
};

class FrameHeaderCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(FrameHeaderCorruption, IsRejected) {
  auto bytes = header_bytes(signed_header(MessageType::kPartitionSigns, 100));
  const Corruption& c = GetParam();
  std::memcpy(bytes.data() + c.offset, c.bytes.data(), c.bytes.size());
  auto decoded = decode_frame_header(bytes, FrameLimits{});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, c.expected) << decoded.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(
    AllFields, FrameHeaderCorruption,
    ::testing::Values(
        Corruption{"magic", 0, {'X'}, ErrorCode::kMalformed}, Corruption{"version_1", 4, {1}, ErrorCode::kMalformed},
        Corruption{"version_2", 4, {2}, ErrorCode::kMalformed},  // older versions
        Corruption{"version_3", 4, {3}, ErrorCode::kMalformed}, Corruption{"version_4", 4, {4}, ErrorCode::kMalformed},
        Corruption{"version_6", 4, {6}, ErrorCode::kMalformed}, Corruption{"type0", 5, {0}, ErrorCode::kMalformed},
        Corruption{"type_high", 5, {200}, ErrorCode::kMalformed}, Corruption{"flags", 6, {3}, ErrorCode::kMalformed},
        Corruption{"meta_length", 8, {135}, ErrorCode::kMalformed},
        Corruption{"meta_length_huge", 8, {0xff, 0xff, 0xff, 0xff}, ErrorCode::kMalformed},
        Corruption{"reserved", 12, {1}, ErrorCode::kMalformed},
        Corruption{"payload_2_64", 16, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ErrorCode::kLimitExceeded},
        Corruption{"payload_over_limit", 16, {0x01, 0x00, 0x00, 0x04}, ErrorCode::kLimitExceeded}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(FrameHeader, UnsignedMustHaveNoEnvelope) {
  FrameHeader header;
  header.type = MessageType::kControl;
  header.meta_length = kEnvelopeMetaSize;  // flags say unsigned
  EXPECT_EQ(decode_frame_header(header_bytes(header), FrameLimits{}).error().code, ErrorCode::kMalformed);
  header.meta_length = 0;
  EXPECT_TRUE(decode_frame_header(header_bytes(header), FrameLimits{}).ok());
}

TEST(FrameHeader, ShortInput) {
  const auto bytes = header_bytes(signed_header(MessageType::kVote, 1));
  for (std::size_t n = 0; n < kFrameHeaderSize; ++n)
    EXPECT_EQ(decode_frame_header(ByteSpan(bytes).first(n), FrameLimits{}).error().code, ErrorCode::kMalformed);
}

TEST(FrameHeader, PerTypeLimits) {
  FrameLimits limits;
  limits.set_limit(MessageType::kVote, 1000);
  EXPECT_TRUE(decode_frame_header(header_bytes(signed_header(MessageType::kVote, 1000)), limits).ok());
  EXPECT_EQ(decode_frame_header(header_bytes(signed_header(MessageType::kVote, 1001)), limits).error().code,
            ErrorCode::kLimitExceeded);
  // Another type keeps its own limit.
  EXPECT_TRUE(decode_frame_header(header_bytes(signed_header(MessageType::kPartitionSigns, 1001)), limits).ok());
  EXPECT_EQ(decode_frame_header(header_bytes(signed_header(MessageType::kHello, 5000)), limits).error().code,
            ErrorCode::kLimitExceeded);
  // A limit near 2^64 is clamped so that meta + payload never overflows.
  limits.set_limit(MessageType::kStateTransfer, UINT64_MAX);
  auto decoded = decode_frame_header(header_bytes(signed_header(MessageType::kStateTransfer, UINT64_MAX)), limits);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kLimitExceeded);
}

TEST(MessageType, Names) {
  EXPECT_EQ(message_type_name(MessageType::kVote), "vote");
  EXPECT_FALSE(is_valid_message_type(0));
  EXPECT_TRUE(is_valid_message_type(7));
  EXPECT_TRUE(is_valid_message_type(8));
  EXPECT_EQ(message_type_name(MessageType::kVotePiece), "vote-piece");
  EXPECT_TRUE(is_valid_message_type(9));
  EXPECT_FALSE(is_valid_message_type(10));
}

}  // namespace
}  // namespace ballot::transport
