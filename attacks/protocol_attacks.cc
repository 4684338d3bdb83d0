#include "attacks/protocol_attacks.h"

#include <memory>

#include "core/enforce.h"

namespace ballot::attacks {
namespace {

constexpr std::size_t kSignatureOffset = transport::kFrameHeaderSize + transport::kSignedFieldsSize;

void store_le(std::uint8_t* out, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

// A valid, unsigned, empty control-frame header made invalid as `kind` says; `value` (any 64 bits)
// picks the offending field's value, always mapped to an invalid one.
OutboundFrame malformed_with(MalformedKind kind, std::uint64_t value) {
  transport::FrameHeader header;
  header.type = MessageType::kControl;
  auto bytes = transport::encode_frame_header(header);
  switch (kind) {
    case MalformedKind::kBadMagic: {
      const std::uint32_t flip = static_cast<std::uint32_t>(value) | 1u;  // non-zero: the magic changes
      store_le(bytes.data(), transport::kFrameMagic ^ flip, 4);
      break;
    }
    case MalformedKind::kBadVersion: {
      // Any byte but kProtocolVersion: 255 values, value mod 255 skips the valid one.
      std::uint8_t version = static_cast<std::uint8_t>(value % 255);
      if (version >= transport::kProtocolVersion) ++version;
      bytes[4] = version;
      break;
    }
    case MalformedKind::kUnknownType: {
      // 0 or kMessageTypeCount..255.
      const std::uint64_t choices = 256 - transport::kMessageTypeCount + 1;
      const std::uint64_t pick = value % choices;
      bytes[5] = pick == 0 ? 0 : static_cast<std::uint8_t>(transport::kMessageTypeCount + pick - 1);
      break;
    }
    case MalformedKind::kUnknownFlags: {
      std::uint16_t flags = static_cast<std::uint16_t>(value);
      if ((flags & ~transport::kFrameFlagSigned) == 0) flags |= 0x8000;
      store_le(bytes.data() + 6, flags, 2);
      break;
    }
    case MalformedKind::kBadMetaLength: {
      // Signed with a meta length other than kEnvelopeMetaSize, or unsigned with a non-zero one.
      const bool is_signed = (value & 1u) != 0;
      std::uint32_t meta = static_cast<std::uint32_t>(value >> 1);
      if (is_signed && meta == transport::kEnvelopeMetaSize) meta += 1;
      if (!is_signed && meta == 0) meta = transport::kEnvelopeMetaSize;
      store_le(bytes.data() + 6, is_signed ? transport::kFrameFlagSigned : 0, 2);
      store_le(bytes.data() + 8, meta, 4);
      break;
    }
    case MalformedKind::kNonZeroReserved:
      store_le(bytes.data() + 12, static_cast<std::uint32_t>(value) | 0x80000000u, 4);
      break;
  }
  return OutboundFrame{std::vector<std::uint8_t>(bytes.begin(), bytes.end()), nullptr};
}

}  // namespace

std::string_view malformed_kind_name(MalformedKind kind) noexcept {
  switch (kind) {
    case MalformedKind::kBadMagic:
      return "bad-magic";
    case MalformedKind::kBadVersion:
      return "bad-version";
    case MalformedKind::kUnknownType:
      return "unknown-type";
    case MalformedKind::kUnknownFlags:
      return "unknown-flags";
    case MalformedKind::kBadMetaLength:
      return "bad-meta-length";
    case MalformedKind::kNonZeroReserved:
      return "non-zero-reserved";
  }
  return "unknown";
}

OutboundFrame forge_signature(OutboundFrame frame) {
  BALLOT_ENFORCE_EQ(frame.head.size(), transport::kFrameHeaderSize + transport::kEnvelopeMetaSize);
  BALLOT_ENFORCE((frame.head[6] & transport::kFrameFlagSigned) != 0, "forge_signature needs a signed frame");
  frame.head[kSignatureOffset] ^= 0x01;  // first byte of R: the Ed25519 verification fails
  return frame;
}

OutboundFrame tamper_payload(OutboundFrame frame) {
  BALLOT_ENFORCE_EQ(frame.head.size(), transport::kFrameHeaderSize + transport::kEnvelopeMetaSize);
  BALLOT_ENFORCE(frame.payload != nullptr && !frame.payload->empty(), "tamper_payload needs a payload");
  auto changed = std::make_shared<std::vector<std::uint8_t>>(*frame.payload);
  (*changed)[0] ^= 0x01;
  frame.payload = std::move(changed);
  return frame;
}

OutboundFrame malformed_frame(MalformedKind kind) { return malformed_with(kind, 0); }

OutboundFrame malformed_frame(Rng& rng) {
  const auto kind = static_cast<MalformedKind>(rng.uniform_int(kMalformedKindCount));
  return malformed_with(kind, rng.next_u64());
}

OutboundFrame oversized_frame(MessageType type, std::uint64_t claimed_payload_bytes) {
  transport::FrameHeader header;
  header.type = type;
  header.flags = transport::kFrameFlagSigned;  // looks like any sealed frame
  header.meta_length = transport::kEnvelopeMetaSize;
  header.payload_length = claimed_payload_bytes;
  const auto bytes = transport::encode_frame_header(header);
  return OutboundFrame{std::vector<std::uint8_t>(bytes.begin(), bytes.end()), nullptr};
}

}  // namespace ballot::attacks
