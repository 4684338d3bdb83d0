#include "runtime/decision_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "core/byte_io.h"
#include "core/file_io.h"
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

namespace {

// The first round of the header at the start of `bytes`; kMalformed when it is not this version's.
Result<std::uint64_t> decode_header(std::span<const std::uint8_t> bytes) {
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
  return reader.read<std::uint64_t>("first round");
}

// Visits the records that follow the header: `remaining` bytes, read in order through `read`,
// which fills the span it is given or returns false. One record is held at a time.
template <typename Read>
DecisionLogScan scan_records(std::uint64_t first_round, std::uint64_t remaining, Read&& read,
                             const DecisionVisitor& visit) {
  DecisionLogScan scan{first_round, 0, 0};
  std::vector<std::uint8_t> record;  // round ‖ length ‖ payload: what the record's digest covers
  transport::Digest digest{};
  while (remaining > 0) {
    bool go_on = true;
    const bool intact = [&] {
      if (remaining < kRecordHeadBytes + transport::kDigestSize) return false;
      record.resize(kRecordHeadBytes);
      if (!read(std::span(record))) return false;
      ByteReader head(record, "decision record");
      const auto round = *head.read<std::uint64_t>("round");
      const auto length = *head.read<std::uint64_t>("length");
      if (round != first_round + scan.decisions) return false;
      if (length > remaining - kRecordHeadBytes - transport::kDigestSize) return false;
      record.resize(kRecordHeadBytes + static_cast<std::size_t>(length));
      if (!read(std::span(record).subspan(kRecordHeadBytes)) || !read(std::span(digest))) return false;
      if (transport::sha256(record) != digest) return false;
      remaining -= record.size() + digest.size();
      ++scan.decisions;
      go_on = visit(round, std::span<const std::uint8_t>(record).subspan(kRecordHeadBytes));
      return true;
    }();
    if (!intact) {
      scan.dropped_bytes = static_cast<std::size_t>(remaining);
      break;
    }
    if (!go_on) break;
  }
  return scan;
}

Result<DecisionLogContents> collect(const std::function<Result<DecisionLogScan>(const DecisionVisitor&)>& scan_with) {
  DecisionLogContents contents;
  BALLOT_ASSIGN_OR_RETURN(
      const auto scan, scan_with([&](std::uint64_t round, std::span<const std::uint8_t> payload) {
        contents.decisions.push_back(LoggedDecision{round, std::vector<std::uint8_t>(payload.begin(), payload.end())});
        return true;
      }));
  contents.first_round = scan.first_round;
  contents.dropped_bytes = scan.dropped_bytes;
  return contents;
}

}  // namespace

Result<DecisionLogScan> scan_decision_log(std::span<const std::uint8_t> bytes, const DecisionVisitor& visit) {
  BALLOT_ASSIGN_OR_RETURN(const auto first_round, decode_header(bytes));
  std::size_t at = kHeaderBytes;
  const auto read = [&](std::span<std::uint8_t> into) {
    if (into.size() > bytes.size() - at) return false;
    if (!into.empty()) std::memcpy(into.data(), bytes.data() + at, into.size());
    at += into.size();
    return true;
  };
  return scan_records(first_round, bytes.size() - kHeaderBytes, read, visit);
}

Result<DecisionLogScan> scan_decision_log(const std::filesystem::path& path, const DecisionVisitor& visit) {
  const std::string named = "decision log '" + path.string() + "'";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return make_error(ErrorCode::kNotFound, "no decision log at '" + path.string() + "'");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot stat " + named + ": " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, "cannot open " + named + ": " + std::strerror(errno));
  std::array<std::uint8_t, kHeaderBytes> header{};
  const auto head = static_cast<std::size_t>(std::min<std::uintmax_t>(size, kHeaderBytes));
  if (!in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(head))) {
    return make_error(ErrorCode::kIo, "cannot read " + named);
  }
  auto first_round = decode_header(std::span(header).first(head));
  if (!first_round.ok()) {
    return make_error(first_round.error().code, "'" + path.string() + "': " + first_round.error().message);
  }
  // A record the file ends inside, or one that cannot be read, ends the log like a torn write.
  const auto read = [&](std::span<std::uint8_t> into) {
    return static_cast<bool>(in.read(reinterpret_cast<char*>(into.data()), static_cast<std::streamsize>(into.size())));
  };
  return scan_records(*first_round, size - head, read, visit);
}

Result<DecisionLogContents> decode_decision_log(std::span<const std::uint8_t> bytes) {
  return collect([&](const DecisionVisitor& visit) { return scan_decision_log(bytes, visit); });
}

Result<DecisionLogContents> read_decision_log(const std::filesystem::path& path) {
  return collect([&](const DecisionVisitor& visit) { return scan_decision_log(path, visit); });
}

std::filesystem::path decision_log_path(const std::filesystem::path& checkpoint_path) {
  return checkpoint_path.string() + ".decisions";
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
