#include "transport/frame.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "transport/detail/le.h"

namespace ballot::transport {

using detail::load_le;
using detail::store_le;

std::string_view message_type_name(MessageType type) noexcept {
  switch (type) {
    case MessageType::kHello: return "hello";
    case MessageType::kRoundStart: return "round-start";
    case MessageType::kPartitionSigns: return "partition-signs";
    case MessageType::kVote: return "vote";
    case MessageType::kDecision: return "decision";
    case MessageType::kStateTransfer: return "state-transfer";
    case MessageType::kControl: return "control";
  }
  return "unknown";
}

bool is_valid_message_type(std::uint8_t value) noexcept { return value >= 1 && value < kMessageTypeCount; }

std::array<std::uint8_t, kFrameHeaderSize> encode_frame_header(const FrameHeader& header) {
  std::array<std::uint8_t, kFrameHeaderSize> out{};
  store_le<std::uint32_t>(out.data() + 0, kFrameMagic);
  out[4] = kProtocolVersion;
  out[5] = static_cast<std::uint8_t>(header.type);
  store_le<std::uint16_t>(out.data() + 6, header.flags);
  store_le<std::uint32_t>(out.data() + 8, header.meta_length);
  store_le<std::uint32_t>(out.data() + 12, 0);
  store_le<std::uint64_t>(out.data() + 16, header.payload_length);
  return out;
}

Result<FrameHeader> decode_frame_header(ByteSpan bytes, const FrameLimits& limits) {
  if (bytes.size() < kFrameHeaderSize)
    return make_error(ErrorCode::kMalformed, "frame header needs " + std::to_string(kFrameHeaderSize) +
                                                 " bytes, got " + std::to_string(bytes.size()));
  const std::uint8_t* in = bytes.data();
  const auto magic = load_le<std::uint32_t>(in);
  if (magic != kFrameMagic) return make_error(ErrorCode::kMalformed, "bad frame magic " + to_hex(bytes.first(4)));
  if (in[4] != kProtocolVersion)
    return make_error(ErrorCode::kMalformed, "unsupported protocol version " + std::to_string(in[4]) +
                                                 " (this build speaks " + std::to_string(kProtocolVersion) + ")");
  if (!is_valid_message_type(in[5])) return make_error(ErrorCode::kMalformed, "unknown message type " + std::to_string(in[5]));
  FrameHeader header;
  header.type = static_cast<MessageType>(in[5]);
  header.flags = load_le<std::uint16_t>(in + 6);
  header.meta_length = load_le<std::uint32_t>(in + 8);
  header.payload_length = load_le<std::uint64_t>(in + 16);
  if ((header.flags & ~kFrameFlagSigned) != 0)
    return make_error(ErrorCode::kMalformed, "unknown frame flags " + std::to_string(header.flags));
  if (load_le<std::uint32_t>(in + 12) != 0) return make_error(ErrorCode::kMalformed, "reserved frame bytes are not zero");
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
