#include "attacks/collusion.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace ballot::attacks {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'B', 'L', 'T', 'C', 'O', 'L', 'L', '1'};
constexpr std::size_t kHeaderSize = 16;

std::string round_dir(const std::string& base, std::uint64_t round) {
  return (fs::path(base) / ("r" + std::to_string(round))).string();
}

// "m<digits>.vec" → the member index; anything else (temporary files, strangers) → false. Only
// the canonical spelling publish() writes counts (no leading zero, so "m07.vec" cannot pose as a
// second copy of member 7), and only node-sized ids (< 2^32).
bool member_of(const std::string& name, std::size_t& member) {
  if (name.size() < 6 || name[0] != 'm' || name.compare(name.size() - 4, 4, ".vec") != 0) return false;
  const char* first = name.data() + 1;
  const char* last = name.data() + name.size() - 4;
  if (*first == '0' && last - first > 1) return false;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || value > 0xffffffffULL) return false;
  member = static_cast<std::size_t>(value);
  return true;
}

Result<std::vector<std::uint8_t>> read_file(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot stat " + path.string() + ": " + ec.message());
  if (size > kHeaderSize + 4 * DirectoryCollusion::kMaxValues)
    return make_error(ErrorCode::kLimitExceeded, path.string() + " is larger than any shared vector");
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    return make_error(ErrorCode::kIo, "cannot read " + path.string());
  return bytes;
}

}  // namespace

// ---- in memory ----------------------------------------------------------------------------------

Status MemoryCollusion::publish(std::uint64_t round, std::size_t member, std::span<const float> values) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    rounds_[round][member].assign(values.begin(), values.end());
  }
  changed_.notify_all();
  return Status();
}

Result<std::vector<SharedVector>> MemoryCollusion::gather(std::uint64_t round, std::size_t members,
                                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto enough = [&] {
    const auto it = rounds_.find(round);
    return members == 0 || (it != rounds_.end() && it->second.size() >= members);
  };
  if (!changed_.wait_for(lock, timeout, enough))
    return make_error(ErrorCode::kTimeout, "collusion: fewer than " + std::to_string(members) + " vectors for round " +
                                               std::to_string(round));
  std::vector<SharedVector> out;
  const auto it = rounds_.find(round);
  if (it != rounds_.end())
    for (const auto& [member, values] : it->second) out.push_back({member, values});
  return out;
}

void MemoryCollusion::forget_before(std::uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  rounds_.erase(rounds_.begin(), rounds_.lower_bound(round));
}

// ---- in a shared directory ----------------------------------------------------------------------

Result<std::unique_ptr<DirectoryCollusion>> DirectoryCollusion::open(const std::string& directory,
                                                                     std::chrono::milliseconds poll) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec || !fs::is_directory(directory))
    return make_error(ErrorCode::kIo,
                      "collusion directory " + directory + ": " + (ec ? ec.message() : std::string("not a directory")));
  return std::unique_ptr<DirectoryCollusion>(
      new DirectoryCollusion(directory, std::max(poll, std::chrono::milliseconds(1))));
}

std::vector<std::uint8_t> DirectoryCollusion::encode(std::span<const float> values) {
  std::vector<std::uint8_t> out(kHeaderSize + 4 * values.size());
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  const std::uint64_t count = values.size();
  for (int b = 0; b < 8; ++b) out[8 + b] = static_cast<std::uint8_t>(count >> (8 * b));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto bits = std::bit_cast<std::uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) out[kHeaderSize + 4 * i + b] = static_cast<std::uint8_t>(bits >> (8 * b));
  }
  return out;
}

Result<std::vector<float>> DirectoryCollusion::decode(std::span<const std::uint8_t> bytes, const std::string& name) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return make_error(ErrorCode::kMalformed, "collusion file " + name + ": bad header");
  std::uint64_t count = 0;
  for (int b = 0; b < 8; ++b) count |= static_cast<std::uint64_t>(bytes[8 + b]) << (8 * b);
  if (count > kMaxValues)
    return make_error(ErrorCode::kLimitExceeded, "collusion file " + name + ": " + std::to_string(count) + " values");
  if (bytes.size() != kHeaderSize + 4 * count)
    return make_error(ErrorCode::kMalformed, "collusion file " + name + ": " + std::to_string(bytes.size()) +
                                                 " bytes for " + std::to_string(count) + " values");
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= static_cast<std::uint32_t>(bytes[kHeaderSize + 4 * i + b]) << (8 * b);
    values[i] = std::bit_cast<float>(bits);
  }
  return values;
}

Status DirectoryCollusion::publish(std::uint64_t round, std::size_t member, std::span<const float> values) {
  static std::atomic<std::uint64_t> counter{0};
  const fs::path dir = round_dir(directory_, round);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  const fs::path final_path = dir / ("m" + std::to_string(member) + ".vec");
  const fs::path temp = dir / (".m" + std::to_string(member) + "." + std::to_string(::getpid()) + "." +
                               std::to_string(counter.fetch_add(1)) + ".tmp");
  {
    const auto bytes = encode(values);
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return make_error(ErrorCode::kIo, "cannot write " + temp.string());
  }
  fs::rename(temp, final_path, ec);  // atomic: readers see the whole file or none
  if (ec) {
    fs::remove(temp, ec);
    return make_error(ErrorCode::kIo, "cannot publish " + final_path.string());
  }
  return Status();
}

Result<std::vector<SharedVector>> DirectoryCollusion::gather(std::uint64_t round, std::size_t members,
                                                             std::chrono::milliseconds timeout) {
  const fs::path dir = round_dir(directory_, round);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::vector<std::pair<std::size_t, fs::path>> found;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::size_t member = 0;
      if (member_of(it->path().filename().string(), member)) found.emplace_back(member, it->path());
    }
    if (found.size() >= members) {
      std::sort(found.begin(), found.end());
      std::vector<SharedVector> out;
      for (const auto& [member, path] : found) {
        BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(path));
        BALLOT_ASSIGN_OR_RETURN(auto values, decode(bytes, path.string()));
        out.push_back({member, std::move(values)});
      }
      return out;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(ErrorCode::kTimeout, "collusion: " + std::to_string(found.size()) + " of " +
                                                 std::to_string(members) + " vectors for round " +
                                                 std::to_string(round) + " in " + dir.string());
    std::this_thread::sleep_for(poll_);
  }
}

void DirectoryCollusion::forget_before(std::uint64_t round) {
  std::error_code ec;
  std::vector<fs::path> old;  // collected first: removing while iterating is unspecified
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 2 || name[0] != 'r') continue;
    std::uint64_t value = 0;
    const auto [last, parse_ec] = std::from_chars(name.data() + 1, name.data() + name.size(), value);
    if (parse_ec == std::errc() && last == name.data() + name.size() && value < round) old.push_back(it->path());
  }
  for (const auto& path : old) fs::remove_all(path, ec);
}

}  // namespace ballot::attacks
