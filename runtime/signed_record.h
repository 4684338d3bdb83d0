// SignedRecord: what a node signed, per (round, message type) — its slashing-protection record,
// as validator clients keep one — so that it never signs two different messages for one round
// and type, across state transfers and restarts included.
//
// Before a vote or partition signs leave the node, seal_once() looks the (round, type) up: not
// there, it signs, records the envelope (durably, before the frame is sent) and returns the
// frame; there with the same payload digest, it returns the recorded signed bytes again (the
// same envelope and payload, nothing newly signed); there with another digest (the node lost
// state it had when it signed, e.g. its momentum across a restart), it returns nothing: the node
// abstains in that round. A node whose state transfer rewinds it (the server resumed from an
// older checkpoint) therefore re-sends what it sent before, bit for bit, or nothing.
//
// File (little-endian): "BALLOTSR" | version u32 (1) | count u32 | count × the 136-byte envelope
// encoding (transport/envelope.h). Entries older than `window` rounds behind the newest are
// dropped; the file is rewritten by atomic replace (runtime/checkpoint.h) on every new entry.
// Read back it is untrusted: decode_signed_record() checks the count against the limit and the
// size before allocating, and load checks every entry's sender, job and signature.
//
// Thread-safety: none (one node's receive loop owns it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "transport/envelope.h"
#include "transport/identity.h"

namespace ballot::runtime {

inline constexpr std::uint32_t kSignedRecordVersion = 1;
inline constexpr std::size_t kSignedRecordMaxEntries = 4096;

std::vector<std::uint8_t> encode_signed_record(std::span<const transport::SignedEnvelope> entries);
// kMalformed unless `bytes` is exactly one record of at most `max_entries` well-formed envelopes.
Result<std::vector<transport::SignedEnvelope>> decode_signed_record(std::span<const std::uint8_t> bytes,
                                                                    std::size_t max_entries = kSignedRecordMaxEntries);

// The frame of a recorded envelope and its payload (the bytes Signer::seal produced).
transport::OutboundFrame frame_of(const transport::SignedEnvelope& envelope,
                                  std::shared_ptr<const std::vector<std::uint8_t>> payload);

class SignedRecord {
 public:
  // Reads `path` if it exists (empty path: in memory only, for one process). Every entry must be
  // signed by `self` (its key in `registry`) for `job`; a damaged or foreign file is an error
  // naming it, never silently ignored (signing anew could equivocate).
  static Result<SignedRecord> open(std::filesystem::path path, transport::NodeId self, std::uint64_t job,
                                   const transport::VerifyKey* key, std::uint64_t window = 128);

  // The frame to send for `payload` of (type, round), or nothing: abstain (see above). `seal`
  // signs a new frame (the transport's seal). Errors: the record could not be written (then
  // nothing was sent).
  template <typename Seal>
  Result<std::optional<transport::OutboundFrame>> seal_once(transport::MessageType type, std::uint64_t round,
                                                            std::shared_ptr<const std::vector<std::uint8_t>> payload,
                                                            Seal&& seal);

  const transport::SignedEnvelope* find(transport::MessageType type, std::uint64_t round) const;
  std::size_t size() const noexcept { return entries_.size(); }
  std::uint64_t abstained() const noexcept { return abstained_; }

 private:
  SignedRecord() = default;
  Status add(const transport::SignedEnvelope& envelope);
  std::filesystem::path path_;
  std::uint64_t window_ = 128;
  std::vector<transport::SignedEnvelope> entries_;  // ascending by round
  std::uint64_t abstained_ = 0;
};

template <typename Seal>
Result<std::optional<transport::OutboundFrame>> SignedRecord::seal_once(
    transport::MessageType type, std::uint64_t round, std::shared_ptr<const std::vector<std::uint8_t>> payload,
    Seal&& seal) {
  using Frame = std::optional<transport::OutboundFrame>;
  if (const auto* recorded = find(type, round)) {
    const auto digest = transport::payload_digest(payload ? transport::ByteSpan(*payload) : transport::ByteSpan());
    if (recorded->header.payload_digest == digest) return Frame(frame_of(*recorded, std::move(payload)));
    ++abstained_;
    return Frame();
  }
  transport::OutboundFrame frame = seal(type, round, std::move(payload));
  if (frame.head.size() == transport::kFrameHeaderSize + transport::kEnvelopeMetaSize) {
    auto envelope =
        transport::decode_envelope(std::span<const std::uint8_t>(frame.head).subspan(transport::kFrameHeaderSize));
    if (envelope.ok()) BALLOT_TRY(add(*envelope));
  }
  return Frame(std::move(frame));
}

}  // namespace ballot::runtime
