#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace ballot {
namespace {

Error io_error(const std::filesystem::path& path, const std::string& what) {
  return make_error(ErrorCode::kIo, what + " '" + path.string() + "': " + std::strerror(errno));
}

// What a writer of `path` killed mid-write left (path.tmp.XXXXXX, a full-size checkpoint each
// time): removed once it is older than any write still going on could be.
void remove_stale_temporaries(const std::filesystem::path& path) {
  const std::string prefix = path.filename().string() + ".tmp.";
  const auto directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const auto stale_before = std::filesystem::file_time_type::clock::now() - std::chrono::minutes(10);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    std::error_code ignored;
    if (it->is_regular_file(ignored) && it->last_write_time(ignored) < stale_before)
      std::filesystem::remove(it->path(), ignored);
  }
}

}  // namespace

Result<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                            std::string_view what) {
  const std::string named = std::string(what) + " '" + path.string() + "'";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return make_error(ErrorCode::kNotFound, "no " + std::string(what) + " at '" + path.string() + "'");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot stat " + named + ": " + ec.message());
  if (size > max_bytes) {
    return make_error(ErrorCode::kLimitExceeded, named + " has " + std::to_string(size) + " bytes, more than " +
                                                     std::to_string(max_bytes) + " (the most a valid one holds)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, "cannot open " + named + ": " + std::strerror(errno));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in || in.peek() != std::ifstream::traits_type::eof()) {
    return make_error(ErrorCode::kIo, "cannot read " + named + " (it changed while being read)");
  }
  return bytes;
}

Status write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes, mode_t mode) {
  std::error_code ec;
  const auto directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(directory, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + directory.string() + "': " + ec.message());
  remove_stale_temporaries(path);
  // A fresh name, created exclusively: a file or symlink someone left at a fixed name is neither
  // followed nor reused (with its permissions). mkostemp creates it 0600; fchmod sets `mode`.
  std::string temporary = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return io_error(temporary, "cannot create");
  const auto fail = [&](const std::filesystem::path& where, const char* what) {
    auto error = io_error(where, what);
    ::close(fd);
    ::unlink(temporary.c_str());
    return error;
  };
  if (::fchmod(fd, mode) != 0) return fail(temporary, "cannot set the permissions of");
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(temporary, "cannot write");
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail(temporary, "cannot fsync");
  if (::close(fd) != 0) {
    auto error = io_error(temporary, "cannot close");
    ::unlink(temporary.c_str());
    return error;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    auto error = io_error(path, "cannot rename onto");
    ::unlink(temporary.c_str());
    return error;
  }
  // Make the rename itself durable.
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

}  // namespace ballot
