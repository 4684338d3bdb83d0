// Frames: the unit on the wire. A fixed 24-byte little-endian header, then `meta_length` bytes of
// envelope metadata (transport/envelope.h; zero for unsigned frames), then the payload.
//
//   offset size field
//   0      4    magic           0x544C4142 ("BALT" as bytes 42 41 4C 54)
//   4      1    version         kProtocolVersion; any other value is rejected
//   5      1    type            MessageType
//   6      2    flags           bit 0: signed (envelope present); other bits must be zero
//   8      4    meta_length     kEnvelopeMetaSize when signed, 0 otherwise
//   12     4    reserved        must be zero
//   16     8    payload_length  at most the configured limit of `type`
//
// decode_frame_header() validates every field before anyone allocates or reads the body, so a
// peer announcing 2^64-1 bytes costs 24 bytes of reading and an error, never an allocation.
// All functions are pure and thread-safe; decoding is O(1) for the header, O(size) for frames.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "transport/crypto.h"

namespace ballot::transport {

enum class MessageType : std::uint8_t {
  kHello = 1,           // first frame of a session: the sender's claimed identity (signed)
  kRoundStart = 2,      // server -> nodes: RoundStart{job, round, deadline}
  kPartitionSigns = 3,  // node -> node (exchange placement): one partition's packed signs (was kGradient)
  kVote = 4,            // node -> server: the node's vote c_i
  kDecision = 5,        // server -> nodes: the round's decision v_r (was kResult)
  kStateTransfer = 6,   // server -> node: the model state, to a rejoining node (was kCheckpoint)
  kControl = 7,         // small tagged messages: Join, Finish, Evidence (runtime/messages.h)
  kDecisionPiece = 8,   // server -> node: one piece of the round's decision; node -> nodes: it relayed
  kVotePiece = 9,       // node -> server: one piece of the node's vote, sent while it computes the rest
};
inline constexpr std::size_t kMessageTypeCount = 10;  // indexable by the numeric value

inline constexpr std::uint32_t kFrameMagic = 0x544C4142u;
inline constexpr std::uint8_t kProtocolVersion =
    5;  // 5: sparse directions chain their entries; 4: sparse fp32 decisions
inline constexpr std::size_t kFrameHeaderSize = 24;
inline constexpr std::uint16_t kFrameFlagSigned = 1;
inline constexpr std::size_t kEnvelopeMetaSize = 136;  // see transport/envelope.h

std::string_view message_type_name(MessageType type) noexcept;
bool is_valid_message_type(std::uint8_t value) noexcept;

// Largest payload accepted per message type, in bytes. Defaults fit an 11.2M-parameter model's
// sign vector (1.4 MB) with room to spare, and small control messages.
struct FrameLimits {
  std::array<std::uint64_t, kMessageTypeCount> max_payload = {
      0,            // (unused: no type 0)
      4 * 1024,     // hello
      64 * 1024,    // round start
      64ull << 20,  // gradient
      64ull << 20,  // vote
      64ull << 20,  // result
      1ull << 30,   // checkpoint
      64 * 1024,    // control
      64ull << 20,  // decision piece
      64ull << 20,  // vote piece
  };
  std::uint64_t limit(MessageType type) const noexcept { return max_payload[static_cast<std::size_t>(type)]; }
  void set_limit(MessageType type, std::uint64_t bytes) noexcept {
    max_payload[static_cast<std::size_t>(type)] = bytes;
  }
};

struct FrameHeader {
  MessageType type = MessageType::kControl;
  std::uint16_t flags = 0;
  std::uint32_t meta_length = 0;
  std::uint64_t payload_length = 0;

  bool is_signed() const noexcept { return (flags & kFrameFlagSigned) != 0; }
  // meta_length + payload_length; cannot overflow once decode_frame_header() accepted the header.
  std::uint64_t body_length() const noexcept { return meta_length + payload_length; }
};

std::array<std::uint8_t, kFrameHeaderSize> encode_frame_header(const FrameHeader& header);

// Validates magic, version, type, flags, meta_length against the flags, reserved bytes and the
// payload length against `limits`. `bytes` must hold at least kFrameHeaderSize bytes (only those
// are read; fewer is kMalformed). Errors: kMalformed, or kLimitExceeded for an oversize length.
Result<FrameHeader> decode_frame_header(ByteSpan bytes, const FrameLimits& limits);

}  // namespace ballot::transport
