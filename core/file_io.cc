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

Error io_error(const std::filesystem::path& path, const std::string& what, int error = errno) {
  return make_error(ErrorCode::kIo, what + " '" + path.string() + "': " + std::strerror(error));
}

// Writes `bytes` to `fd`, sets `mode` (exactly: the umask does not apply), fsyncs and closes it:
// 0, or the errno of the first failure.
int write_and_close(int fd, std::span<const std::uint8_t> bytes, mode_t mode) {
  int error = ::fchmod(fd, mode) == 0 ? 0 : errno;
  for (std::size_t written = 0; error == 0 && written < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      error = n < 0 ? errno : EIO;
    else
      written += static_cast<std::size_t>(n);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

// Makes a new or replaced name in `directory` survive a crash.
void sync_directory(const std::filesystem::path& directory) {
  if (const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
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

Status write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes, mode_t mode,
                             IfExists if_exists) {
  std::error_code ec;
  const auto directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(directory, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + directory.string() + "': " + ec.message());
  remove_stale_temporaries(path);
  // A fresh name, created exclusively: a file or symlink someone left at a fixed name is neither
  // followed nor reused (with its permissions). mkostemp creates it 0600, so a key is never
  // readable by others, not even for a moment.
  std::string temporary = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return io_error(temporary, "cannot create");
  if (const int error = write_and_close(fd, bytes, mode); error != 0) {
    ::unlink(temporary.c_str());
    return io_error(path, "cannot write", error);
  }
  const auto refusal = [&] {
    return make_error(ErrorCode::kInvalidArgument, "refusing to overwrite existing file '" + path.string() + "'");
  };
  if (if_exists == IfExists::kReplace) {
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
      auto error = io_error(path, "cannot rename onto");
      ::unlink(temporary.c_str());
      return error;
    }
  } else {
    // link() never replaces (a symlink at the path included).
    const int linked = ::link(temporary.c_str(), path.c_str()) == 0 ? 0 : errno;
    ::unlink(temporary.c_str());
    if (linked == EEXIST) return refusal();
    if (linked == EPERM || linked == EOPNOTSUPP || linked == ENOSYS || linked == EMLINK) {
      // A file system without hard links (vfat, some FUSE and CIFS mounts): created exclusively in
      // place, and removed if it cannot be written whole.
      const int in_place = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (in_place < 0) return errno == EEXIST ? refusal() : io_error(path, "cannot create");
      if (const int error = write_and_close(in_place, bytes, mode); error != 0) {
        ::unlink(path.c_str());
        return io_error(path, "cannot write", error);
      }
    } else if (linked != 0) {
      return io_error(path, "cannot create", linked);
    }
  }
  sync_directory(directory);
  return {};
}

}  // namespace ballot
