#include "runtime/signed_record.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/checkpoint.h"

namespace ballot::runtime {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'L', 'L', 'O', 'T', 'S', 'R'};
constexpr std::size_t kPrefixSize = sizeof(kMagic) + 4 + 4;

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  return value;
}

Error malformed(const std::string& why) { return make_error(ErrorCode::kMalformed, "signed record: " + why); }

}  // namespace

std::vector<std::uint8_t> encode_signed_record(std::span<const transport::SignedEnvelope> entries) {
  std::vector<std::uint8_t> out(kMagic, kMagic + sizeof(kMagic));
  put_u32(out, kSignedRecordVersion);
  put_u32(out, static_cast<std::uint32_t>(entries.size()));
  for (const auto& entry : entries) {
    const auto bytes = transport::encode_envelope(entry);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

Result<std::vector<transport::SignedEnvelope>> decode_signed_record(std::span<const std::uint8_t> bytes,
                                                                   std::size_t max_entries) {
  if (bytes.size() < kPrefixSize) return malformed("shorter than its header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return malformed("bad magic");
  if (const auto version = get_u32(bytes.data() + 8); version != kSignedRecordVersion) {
    return malformed("version " + std::to_string(version) + ", expected " + std::to_string(kSignedRecordVersion));
  }
  const std::size_t count = get_u32(bytes.data() + 12);
  if (count > max_entries) return make_error(ErrorCode::kLimitExceeded, "signed record: more than " + std::to_string(max_entries) + " entries");
  // count <= max_entries keeps the product far from overflow; compare before touching entries.
  const std::size_t body = bytes.size() - kPrefixSize;
  if (body != count * transport::kEnvelopeMetaSize) return malformed("size does not match its entry count");
  std::vector<transport::SignedEnvelope> entries;
  entries.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto entry = transport::decode_envelope(bytes.subspan(kPrefixSize + i * transport::kEnvelopeMetaSize,
                                                          transport::kEnvelopeMetaSize));
    if (!entry.ok()) return malformed("entry " + std::to_string(i) + ": " + entry.error().message);
    entries.push_back(*entry);
  }
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
  std::error_code ec;
  if (!std::filesystem::exists(record.path_, ec)) return record;
  const auto where = " ('" + record.path_.string() + "'; it holds what this node signed: move it away only if this "
                     "node id never signed anything in this job)";
  const auto size = std::filesystem::file_size(record.path_, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot stat signed record" + where + ": " + ec.message());
  if (size > kPrefixSize + kSignedRecordMaxEntries * transport::kEnvelopeMetaSize) {
    return make_error(ErrorCode::kLimitExceeded, "signed record too large" + where);
  }
  std::ifstream in(record.path_, std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && !in) return make_error(ErrorCode::kIo, "cannot read signed record" + where);
  auto entries = decode_signed_record(bytes);
  if (!entries.ok()) {
    auto error = std::move(entries).error();
    error.message += where;
    return error;
  }
  for (const auto& entry : *entries) {
    const auto& h = entry.header;
    if (h.sender != self || h.job != job || (key != nullptr && !transport::verify_envelope_signature(entry, *key))) {
      return make_error(ErrorCode::kAuthentication, "signed record holds an envelope not signed by node " +
                                                        std::to_string(self) + " for job " + std::to_string(job) + where);
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
  entries_.push_back(envelope);
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const auto& a, const auto& b) { return a.header.round < b.header.round; });
  const std::uint64_t newest = entries_.back().header.round;
  // Older than the window: a state transfer never rewinds a node that far (the server resumes
  // from a checkpoint at most checkpoint_every rounds back). Bounded by the entry limit too.
  std::erase_if(entries_, [&](const auto& e) { return e.header.round + window_ < newest; });
  if (entries_.size() > kSignedRecordMaxEntries) {
    entries_.erase(entries_.begin(), entries_.end() - static_cast<std::ptrdiff_t>(kSignedRecordMaxEntries));
  }
  if (path_.empty()) return {};
  return write_file_atomically(path_, encode_signed_record(entries_));
}

}  // namespace ballot::runtime
