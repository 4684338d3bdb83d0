#include "runtime/decision_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/byte_io.h"
#include "core/file_io.h"
#include "runtime/checkpoint.h"
#include "transport/crypto.h"

namespace ballot::runtime {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'L', 'L', 'O', 'T', 'D', 'L'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 8;
constexpr std::size_t kRecordHeadBytes = 8 + 8;

Error io_error(const std::filesystem::path& path, const std::string& what) {
  return make_error(ErrorCode::kIo, what + " '" + path.string() + "': " + std::strerror(errno));
}

}  // namespace

std::vector<std::uint8_t> encode_decision_log_header(std::uint64_t first_round) {
  ByteWriter out;
  out.put_bytes(std::span(reinterpret_cast<const std::uint8_t*>(kMagic), sizeof(kMagic)))
      .put<std::uint32_t>(kDecisionLogVersion)
      .put<std::uint64_t>(first_round);
  return out.take();
}

std::vector<std::uint8_t> encode_decision_record(std::uint64_t round, std::span<const std::uint8_t> payload) {
  ByteWriter out;
  out.put<std::uint64_t>(round).put<std::uint64_t>(payload.size()).put_bytes(payload);
  const auto digest = transport::sha256(out.bytes());
  out.put_bytes(digest);
  return out.take();
}

Result<DecisionLogContents> decode_decision_log(std::span<const std::uint8_t> bytes) {
  ByteReader reader(bytes, "decision log", sizeof(kMagic));
  if (bytes.size() < kHeaderBytes) return reader.malformed("truncated header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return reader.malformed("bad magic");
  BALLOT_ASSIGN_OR_RETURN(const auto version, reader.read<std::uint32_t>("version"));
  if (version != kDecisionLogVersion) {
    return reader.malformed("version " + std::to_string(version) + ", this build reads version " +
                            std::to_string(kDecisionLogVersion) +
                            " (finish the run with the build that wrote it; without the log the server resumes "
                            "from its checkpoint, as after a lost log end)");
  }
  DecisionLogContents contents;
  BALLOT_ASSIGN_OR_RETURN(contents.first_round, reader.read<std::uint64_t>("first round"));
  while (reader.remaining() > 0) {
    const std::size_t at = reader.position();
    const auto intact = [&]() -> bool {
      if (reader.remaining() < kRecordHeadBytes) return false;
      const auto round = *reader.read<std::uint64_t>("round");
      const auto length = *reader.read<std::uint64_t>("length");
      if (round != contents.first_round + contents.decisions.size()) return false;
      if (length > reader.remaining() || reader.remaining() - length < transport::kDigestSize) return false;
      const auto payload = *reader.take_bytes(static_cast<std::size_t>(length), "payload");
      const auto digest = *reader.take_bytes(transport::kDigestSize, "digest");
      // The record's head and payload lie side by side in the file.
      const auto expected = transport::sha256(bytes.subspan(at, kRecordHeadBytes + payload.size()));
      if (std::memcmp(expected.data(), digest.data(), digest.size()) != 0) return false;
      contents.decisions.push_back(LoggedDecision{round, std::vector<std::uint8_t>(payload.begin(), payload.end())});
      return true;
    }();
    if (!intact) {
      contents.dropped_bytes = bytes.size() - at;
      break;
    }
  }
  return contents;
}

std::filesystem::path decision_log_path(const std::filesystem::path& checkpoint_path) {
  return checkpoint_path.string() + ".decisions";
}

Result<DecisionLogContents> read_decision_log(const std::filesystem::path& path) {
  // A log holds at most checkpoint_every decisions; each is bounded by the frame limit (64 MiB).
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(path, std::uint64_t{1} << 40, "decision log"));
  auto contents = decode_decision_log(bytes);
  if (!contents.ok()) {
    return make_error(contents.error().code, "'" + path.string() + "': " + contents.error().message);
  }
  return contents;
}

DecisionLog::DecisionLog(std::filesystem::path path, int fd, std::uint64_t first_round)
    : path_(std::move(path)), fd_(fd), next_round_(first_round) {}

DecisionLog::DecisionLog(DecisionLog&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), next_round_(other.next_round_) {}

DecisionLog& DecisionLog::operator=(DecisionLog&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    next_round_ = other.next_round_;
  }
  return *this;
}

DecisionLog::~DecisionLog() {
  if (fd_ >= 0) ::close(fd_);
}

Result<DecisionLog> DecisionLog::start(const std::filesystem::path& path, std::uint64_t first_round) {
  BALLOT_TRY(write_file_atomically(path, encode_decision_log_header(first_round)));
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  return DecisionLog(path, fd, first_round);
}

Status DecisionLog::append(std::uint64_t round, std::span<const std::uint8_t> payload) {
  if (round != next_round_) {
    return make_error(ErrorCode::kInvalidArgument, "decision log '" + path_.string() + "': round " +
                                                       std::to_string(round) + " appended, " +
                                                       std::to_string(next_round_) + " expected");
  }
  const auto record = encode_decision_record(round, payload);
  std::size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error(path_, "cannot append to");
    written += static_cast<std::size_t>(n);
  }
  ++next_round_;
  return {};
}

}  // namespace ballot::runtime
