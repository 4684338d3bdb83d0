#include "runtime/checkpoint.h"

#include <cstring>

#include "core/byte_io.h"
#include "core/file_io.h"
#include "transport/crypto.h"

namespace ballot::runtime {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'L', 'L', 'O', 'T', 'C', 'K'};
constexpr std::size_t kFixedHeader = 8 + 4 + 8 + 4;
constexpr std::size_t kDigestBytes = transport::kDigestSize;

}  // namespace

std::vector<std::uint8_t> encode_checkpoint(const Checkpoint& checkpoint) {
  ByteWriter out;
  out.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(kMagic), sizeof(kMagic)))
      .put<std::uint32_t>(kCheckpointVersion)
      .put<std::uint64_t>(checkpoint.round)
      .put<std::uint32_t>(static_cast<std::uint32_t>(checkpoint.sections.size()));
  for (const auto& [name, data] : checkpoint.sections) {
    out.put<std::uint16_t>(static_cast<std::uint16_t>(name.size()))
        .put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(name.data()), name.size()))
        .put<std::uint64_t>(data.size())
        .put_bytes(data);
  }
  const auto digest = transport::sha256(out.bytes());
  out.put_bytes(digest);
  return out.take();
}

Result<Checkpoint> decode_checkpoint(std::span<const std::uint8_t> bytes, const CheckpointLimits& limits) {
  if (bytes.size() > limits.max_total_bytes) {
    return make_error(ErrorCode::kLimitExceeded,
                      "checkpoint of " + std::to_string(bytes.size()) + " bytes exceeds the limit");
  }
  // The digest covers everything before it: checked first, so the fields below come from a file
  // this program wrote (or one forged with intent; the reads stay bounded either way).
  ByteReader whole(bytes, "checkpoint");
  if (bytes.size() < kFixedHeader + kDigestBytes) return whole.malformed("truncated header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return whole.malformed("bad magic");
  const auto body = bytes.first(bytes.size() - kDigestBytes);
  const auto digest = transport::sha256(body);
  if (std::memcmp(digest.data(), bytes.data() + body.size(), kDigestBytes) != 0) {
    return whole.malformed("digest mismatch (corrupted or truncated file)");
  }
  ByteReader reader(body, "checkpoint", sizeof(kMagic));
  Checkpoint checkpoint;
  BALLOT_ASSIGN_OR_RETURN(const auto version, reader.read<std::uint32_t>("version"));
  BALLOT_ASSIGN_OR_RETURN(checkpoint.round, reader.read<std::uint64_t>("round"));
  BALLOT_ASSIGN_OR_RETURN(const auto count, reader.read<std::uint32_t>("section count"));
  if (version != kCheckpointVersion) return reader.malformed("unsupported version " + std::to_string(version));
  if (count > limits.max_sections) {
    return make_error(ErrorCode::kLimitExceeded, "checkpoint has " + std::to_string(count) + " sections");
  }
  for (std::uint32_t s = 0; s < count; ++s) {
    BALLOT_ASSIGN_OR_RETURN(const auto name_length, reader.read<std::uint16_t>("section name length"));
    if (name_length == 0 || name_length > limits.max_name_length || name_length > reader.remaining()) {
      return reader.malformed("bad section name length " + std::to_string(name_length));
    }
    BALLOT_ASSIGN_OR_RETURN(const auto name_bytes, reader.take_bytes(name_length, "section name"));
    std::string name(name_bytes.begin(), name_bytes.end());
    BALLOT_ASSIGN_OR_RETURN(const auto length, reader.read<std::uint64_t>("section length"));
    if (length > reader.remaining()) return reader.malformed("section '" + name + "' runs past the end");
    BALLOT_ASSIGN_OR_RETURN(const auto data, reader.take_bytes(static_cast<std::size_t>(length), "section data"));
    if (!checkpoint.sections.emplace(std::move(name), std::vector<std::uint8_t>(data.begin(), data.end())).second) {
      return reader.malformed("duplicate section");
    }
  }
  BALLOT_TRY(reader.expect_end());
  return checkpoint;
}

Status save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  return write_file_atomically(path, encode_checkpoint(checkpoint));
}

Result<Checkpoint> load_checkpoint(const std::filesystem::path& path, const CheckpointLimits& limits) {
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(path, limits.max_total_bytes, "checkpoint"));
  auto checkpoint = decode_checkpoint(bytes, limits);
  if (!checkpoint.ok()) {
    auto error = std::move(checkpoint).error();
    error.message += " in '" + path.string() + "'";
    return error;
  }
  return checkpoint;
}

}  // namespace ballot::runtime
