#include "runtime/signed_record.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/byte_io.h"
#include "core/file_io.h"
#include "runtime/checkpoint.h"

namespace ballot::runtime {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'L', 'L', 'O', 'T', 'S', 'R'};
constexpr std::size_t kPrefixSize = sizeof(kMagic) + 4 + 4;

}  // namespace

std::vector<std::uint8_t> encode_signed_record(std::span<const transport::SignedEnvelope> entries) {
  ByteWriter out;
  out.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(kMagic), sizeof(kMagic)))
      .put<std::uint32_t>(kSignedRecordVersion)
      .put<std::uint32_t>(static_cast<std::uint32_t>(entries.size()));
  for (const auto& entry : entries) out.put_bytes(transport::encode_envelope(entry));
  return out.take();
}

Result<std::vector<transport::SignedEnvelope>> decode_signed_record(std::span<const std::uint8_t> bytes,
                                                                    std::size_t max_entries) {
  ByteReader reader(bytes, "signed record");
  if (bytes.size() < kPrefixSize) return reader.malformed("shorter than its header");
  BALLOT_ASSIGN_OR_RETURN(const auto magic, reader.take_bytes(sizeof(kMagic), "magic"));
  if (std::memcmp(magic.data(), kMagic, sizeof(kMagic)) != 0) return reader.malformed("bad magic");
  BALLOT_ASSIGN_OR_RETURN(const auto version, reader.read<std::uint32_t>("version"));
  if (version != kSignedRecordVersion) {
    return reader.malformed("version " + std::to_string(version) + ", expected " +
                            std::to_string(kSignedRecordVersion));
  }
  BALLOT_ASSIGN_OR_RETURN(const std::size_t count, reader.read<std::uint32_t>("entry count"));
  if (count > max_entries)
    return make_error(ErrorCode::kLimitExceeded,
                      "signed record: more than " + std::to_string(max_entries) + " entries");
  // count <= max_entries keeps the product far from overflow; compare before touching entries.
  if (reader.remaining() != count * transport::kEnvelopeMetaSize)
    return reader.malformed("size does not match its entry count");
  std::vector<transport::SignedEnvelope> entries;
  entries.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    BALLOT_ASSIGN_OR_RETURN(const auto meta, reader.take_bytes(transport::kEnvelopeMetaSize, "entry"));
    auto entry = transport::decode_envelope(meta);
    if (!entry.ok()) return reader.malformed("entry " + std::to_string(i) + ": " + entry.error().message);
    entries.push_back(*entry);
  }
  BALLOT_TRY(reader.expect_end());
  return entries;
}

transport::OutboundFrame frame_of(const transport::SignedEnvelope& envelope,
                                  std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  transport::FrameHeader header;
  header.type = envelope.header.type;
  header.flags = transport::kFrameFlagSigned;
  header.meta_length = transport::kEnvelopeMetaSize;
  header.payload_length = envelope.header.payload_length;
  transport::OutboundFrame frame;
  const auto head = transport::encode_frame_header(header);
  const auto meta = transport::encode_envelope(envelope);
  frame.head.assign(head.begin(), head.end());
  frame.head.insert(frame.head.end(), meta.begin(), meta.end());
  frame.payload = std::move(payload);
  return frame;
}

Result<SignedRecord> SignedRecord::open(std::filesystem::path path, transport::NodeId self, std::uint64_t job,
                                        const transport::VerifyKey* key, std::uint64_t window) {
  SignedRecord record;
  record.path_ = std::move(path);
  record.window_ = std::max<std::uint64_t>(window, 1);
  if (record.path_.empty()) return record;
  const auto where = " ('" + record.path_.string() +
                     "'; it holds what this node signed: move it away only if this "
                     "node id never signed anything in this job)";
  auto bytes =
      read_file(record.path_, kPrefixSize + kSignedRecordMaxEntries * transport::kEnvelopeMetaSize, "signed record");
  if (!bytes.ok() && bytes.error().code == ErrorCode::kNotFound) return record;
  if (!bytes.ok()) {
    auto error = std::move(bytes).error();
    error.message += where;
    return error;
  }
  auto entries = decode_signed_record(*bytes);
  if (!entries.ok()) {
    auto error = std::move(entries).error();
    error.message += where;
    return error;
  }
  for (const auto& entry : *entries) {
    const auto& h = entry.header;
    if (h.sender != self || h.job != job || (key != nullptr && !transport::verify_envelope_signature(entry, *key))) {
      return make_error(ErrorCode::kAuthentication, "signed record holds an envelope not signed by node " +
                                                        std::to_string(self) + " for job " + std::to_string(job) +
                                                        where);
    }
  }
  record.entries_ = std::move(*entries);
  std::stable_sort(record.entries_.begin(), record.entries_.end(),
                   [](const auto& a, const auto& b) { return a.header.round < b.header.round; });
  return record;
}

const transport::SignedEnvelope* SignedRecord::find(transport::MessageType type, std::uint64_t round) const {
  for (const auto& entry : entries_) {
    if (entry.header.type == type && entry.header.round == round) return &entry;
  }
  return nullptr;
}

Status SignedRecord::add(const transport::SignedEnvelope& envelope) {
  auto entries = entries_;
  entries.push_back(envelope);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.header.round < b.header.round; });
  const std::uint64_t newest = entries.back().header.round;
  // Older than the window: a state transfer never rewinds a node that far (the server resumes
  // from a checkpoint at most checkpoint_every rounds back). Bounded by the entry limit too.
  std::erase_if(entries, [&](const auto& e) { return e.header.round + window_ < newest; });
  if (entries.size() > kSignedRecordMaxEntries) {
    entries.erase(entries.begin(), entries.end() - static_cast<std::ptrdiff_t>(kSignedRecordMaxEntries));
  }
  // Held only once it is on disk: an entry the file lacks would let a caller that goes on after
  // the error send the message, and after a crash sign another one for the same round.
  if (!path_.empty()) BALLOT_TRY(write_file_atomically(path_, encode_signed_record(entries)));
  entries_ = std::move(entries);
  return {};
}

}  // namespace ballot::runtime
