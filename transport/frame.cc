#include "transport/frame.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/byte_io.h"

namespace ballot::transport {

std::string_view message_type_name(MessageType type) noexcept {
  switch (type) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kRoundStart:
      return "round-start";
    case MessageType::kPartitionSigns:
      return "partition-signs";
    case MessageType::kVote:
      return "vote";
    case MessageType::kDecision:
      return "decision";
    case MessageType::kStateTransfer:
      return "state-transfer";
    case MessageType::kControl:
      return "control";
    case MessageType::kDecisionPiece:
      return "decision-piece";
    case MessageType::kVotePiece:
      return "vote-piece";
  }
  return "unknown";
}

bool is_valid_message_type(std::uint8_t value) noexcept { return value >= 1 && value < kMessageTypeCount; }

std::array<std::uint8_t, kFrameHeaderSize> encode_frame_header(const FrameHeader& header) {
  ByteWriter writer;
  writer.put<std::uint32_t>(kFrameMagic)
      .put<std::uint8_t>(kProtocolVersion)
      .put<std::uint8_t>(static_cast<std::uint8_t>(header.type))
      .put<std::uint16_t>(header.flags)
      .put<std::uint32_t>(header.meta_length)
      .put<std::uint32_t>(0)  // reserved
      .put<std::uint64_t>(header.payload_length);
  std::array<std::uint8_t, kFrameHeaderSize> out{};
  std::copy(writer.bytes().begin(), writer.bytes().end(), out.begin());
  return out;
}

Result<FrameHeader> decode_frame_header(ByteSpan bytes, const FrameLimits& limits) {
  if (bytes.size() < kFrameHeaderSize)
    return make_error(ErrorCode::kMalformed, "frame header needs " + std::to_string(kFrameHeaderSize) + " bytes, got " +
                                                 std::to_string(bytes.size()));
  // The length was checked above: the reads below cannot fail (and would return, never throw).
  ByteReader reader(bytes.first(kFrameHeaderSize), "frame header");
  BALLOT_ASSIGN_OR_RETURN(const auto magic, reader.read<std::uint32_t>("magic"));
  if (magic != kFrameMagic) return make_error(ErrorCode::kMalformed, "bad frame magic " + to_hex(bytes.first(4)));
  BALLOT_ASSIGN_OR_RETURN(const auto version, reader.read<std::uint8_t>("version"));
  if (version != kProtocolVersion)
    return make_error(ErrorCode::kMalformed, "unsupported protocol version " + std::to_string(version) +
                                                 " (this build speaks " + std::to_string(kProtocolVersion) + ")");
  BALLOT_ASSIGN_OR_RETURN(const auto type, reader.read<std::uint8_t>("type"));
  if (!is_valid_message_type(type))
    return make_error(ErrorCode::kMalformed, "unknown message type " + std::to_string(type));
  FrameHeader header;
  header.type = static_cast<MessageType>(type);
  BALLOT_ASSIGN_OR_RETURN(header.flags, reader.read<std::uint16_t>("flags"));
  BALLOT_ASSIGN_OR_RETURN(header.meta_length, reader.read<std::uint32_t>("envelope length"));
  BALLOT_ASSIGN_OR_RETURN(const auto reserved, reader.read<std::uint32_t>("reserved"));
  BALLOT_ASSIGN_OR_RETURN(header.payload_length, reader.read<std::uint64_t>("payload length"));
  if ((header.flags & ~kFrameFlagSigned) != 0)
    return make_error(ErrorCode::kMalformed, "unknown frame flags " + std::to_string(header.flags));
  if (reserved != 0) return make_error(ErrorCode::kMalformed, "reserved frame bytes are not zero");
  const std::uint32_t expected_meta = header.is_signed() ? kEnvelopeMetaSize : 0;
  if (header.meta_length != expected_meta)
    return make_error(ErrorCode::kMalformed, "envelope length " + std::to_string(header.meta_length) + " (expected " +
                                                 std::to_string(expected_meta) + ")");
  // Compared alone, before any sum: with meta_length fixed above, meta + payload cannot overflow
  // as long as the configured limit stays below 2^64 - kEnvelopeMetaSize (it is clamped here).
  const std::uint64_t limit = std::min<std::uint64_t>(limits.limit(header.type), UINT64_MAX - kEnvelopeMetaSize);
  if (header.payload_length > limit)
    return make_error(ErrorCode::kLimitExceeded, std::string(message_type_name(header.type)) + " payload length " +
                                                     std::to_string(header.payload_length) + " exceeds limit " +
                                                     std::to_string(limit));
  return header;
}

}  // namespace ballot::transport
