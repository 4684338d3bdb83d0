#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "transport/crypto.h"

namespace ballot::runtime {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'L', 'L', 'O', 'T', 'C', 'K'};
constexpr std::size_t kFixedHeader = 8 + 4 + 8 + 4;
constexpr std::size_t kDigestBytes = transport::kDigestSize;

template <typename T>
void put(std::vector<std::uint8_t>& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// Reads little-endian integers from a span, refusing to run past its end.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::size_t remaining() const { return bytes_.size() - offset_; }
  template <typename T>
  bool get(T& value) {
    if (remaining() < sizeof(T)) return false;
    value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<T>(bytes_[offset_ + i]) << (8 * i));
    offset_ += sizeof(T);
    return true;
  }
  std::span<const std::uint8_t> take(std::size_t count) {  // caller checked remaining()
    auto out = bytes_.subspan(offset_, count);
    offset_ += count;
    return out;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t offset_ = 0;
};

Error malformed(const std::string& why) { return make_error(ErrorCode::kMalformed, "checkpoint: " + why); }

Error io_error(const std::filesystem::path& path, const std::string& what) {
  return make_error(ErrorCode::kIo, what + " '" + path.string() + "': " + std::strerror(errno));
}

}  // namespace

std::vector<std::uint8_t> encode_checkpoint(const Checkpoint& checkpoint) {
  std::vector<std::uint8_t> out(std::begin(kMagic), std::end(kMagic));
  put<std::uint32_t>(out, kCheckpointVersion);
  put<std::uint64_t>(out, checkpoint.round);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(checkpoint.sections.size()));
  for (const auto& [name, data] : checkpoint.sections) {
    put<std::uint16_t>(out, static_cast<std::uint16_t>(name.size()));
    out.insert(out.end(), name.begin(), name.end());
    put<std::uint64_t>(out, data.size());
    out.insert(out.end(), data.begin(), data.end());
  }
  const auto digest = transport::sha256(out);
  out.insert(out.end(), digest.begin(), digest.end());
  return out;
}

Result<Checkpoint> decode_checkpoint(std::span<const std::uint8_t> bytes, const CheckpointLimits& limits) {
  if (bytes.size() > limits.max_total_bytes) {
    return make_error(ErrorCode::kLimitExceeded, "checkpoint of " + std::to_string(bytes.size()) +
                                                     " bytes exceeds the limit");
  }
  if (bytes.size() < kFixedHeader + kDigestBytes) return malformed("truncated header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return malformed("bad magic");
  const auto body = bytes.first(bytes.size() - kDigestBytes);
  const auto digest = transport::sha256(body);
  if (std::memcmp(digest.data(), bytes.data() + body.size(), kDigestBytes) != 0) {
    return malformed("digest mismatch (corrupted or truncated file)");
  }
  Reader reader(body.subspan(sizeof(kMagic)));
  std::uint32_t version = 0, count = 0;
  Checkpoint checkpoint;
  reader.get(version);
  reader.get(checkpoint.round);
  reader.get(count);
  if (version != kCheckpointVersion) return malformed("unsupported version " + std::to_string(version));
  if (count > limits.max_sections) {
    return make_error(ErrorCode::kLimitExceeded, "checkpoint has " + std::to_string(count) + " sections");
  }
  for (std::uint32_t s = 0; s < count; ++s) {
    std::uint16_t name_length = 0;
    if (!reader.get(name_length)) return malformed("truncated section header");
    if (name_length == 0 || name_length > limits.max_name_length || name_length > reader.remaining()) {
      return malformed("bad section name length " + std::to_string(name_length));
    }
    const auto name_bytes = reader.take(name_length);
    std::string name(name_bytes.begin(), name_bytes.end());
    std::uint64_t length = 0;
    if (!reader.get(length)) return malformed("truncated section '" + name + "'");
    if (length > reader.remaining()) return malformed("section '" + name + "' runs past the end");
    const auto data = reader.take(static_cast<std::size_t>(length));
    if (!checkpoint.sections.emplace(std::move(name), std::vector<std::uint8_t>(data.begin(), data.end())).second) {
      return malformed("duplicate section");
    }
  }
  if (reader.remaining() != 0) return malformed("trailing bytes after the last section");
  return checkpoint;
}

Status save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  return write_file_atomically(path, encode_checkpoint(checkpoint));
}

Status write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  std::error_code ec;
  const auto directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(directory, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + directory.string() + "': " + ec.message());
  const auto temporary = path.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error(temporary, "cannot create");
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      auto error = io_error(temporary, "cannot write");
      ::close(fd);
      return error;
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto error = io_error(temporary, "cannot fsync");
    ::close(fd);
    return error;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) return io_error(path, "cannot rename onto");
  // Make the rename itself durable.
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

Result<Checkpoint> load_checkpoint(const std::filesystem::path& path, const CheckpointLimits& limits) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return make_error(ErrorCode::kNotFound, "no checkpoint at '" + path.string() + "'");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot stat '" + path.string() + "': " + ec.message());
  if (size > limits.max_total_bytes) {
    return make_error(ErrorCode::kLimitExceeded, "checkpoint '" + path.string() + "' is too large");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path, "cannot open");
  std::vector<std::uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) return io_error(path, "cannot read");
  auto checkpoint = decode_checkpoint(bytes, limits);
  if (!checkpoint.ok()) {
    auto error = std::move(checkpoint).error();
    error.message += " in '" + path.string() + "'";
    return error;
  }
  return checkpoint;
}

}  // namespace ballot::runtime
