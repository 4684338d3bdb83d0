// The side channel of colluding attackers: in the simulator the omniscient attacks get
// the round's honest vectors handed over; in a process cluster the Byzantine processes instead share
// what each of them would have sent honestly (its own gradient or sign vector) through this
// channel, and craft their messages from the coalition's view (GradientContext::honest = the
// gathered vectors; ALIE's practical setting, Baruch et al. 2019 §4, where attackers estimate ḡ
// and s from their own data).
//
// Two implementations:
//  - MemoryCollusion: in one process (tests, threads of the simulator). Thread-safe.
//  - DirectoryCollusion: processes that share a directory (one machine, or a shared filesystem).
//    publish() writes <dir>/r<round>/m<member>.vec under a temporary name and renames it (atomic
//    on POSIX), so a reader sees a complete file or none; gather() polls. File format: 8 bytes
//    "BLTCOLL1", u64 count (little-endian), count float32 (little-endian). Files are input from
//    other processes: a malformed file is kMalformed naming it, never a crash; count is capped.
// This channel is the adversary's own tooling: it is not authenticated and not part of the
// protocol that honest nodes run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace ballot::attacks {

struct SharedVector {
  std::size_t member = 0;  // the publisher's node index
  std::vector<float> values;
};

class CollusionChannel {
 public:
  virtual ~CollusionChannel() = default;
  // Shares `values` as member `member`'s vector of `round`; a second publish for the same
  // (round, member) replaces the first.
  virtual Status publish(std::uint64_t round, std::size_t member, std::span<const float> values) = 0;
  // Waits until vectors of `members` distinct members are there for `round` and returns them all,
  // ascending by member (possibly more than `members`); kTimeout after `timeout` with fewer.
  virtual Result<std::vector<SharedVector>> gather(std::uint64_t round, std::size_t members,
                                                   std::chrono::milliseconds timeout) = 0;
  // Drops everything of rounds before `round`.
  virtual void forget_before(std::uint64_t round) = 0;
};

class MemoryCollusion final : public CollusionChannel {
 public:
  Status publish(std::uint64_t round, std::size_t member, std::span<const float> values) override;
  Result<std::vector<SharedVector>> gather(std::uint64_t round, std::size_t members,
                                           std::chrono::milliseconds timeout) override;
  void forget_before(std::uint64_t round) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, std::map<std::size_t, std::vector<float>>> rounds_;  // guarded by mutex_
};

class DirectoryCollusion final : public CollusionChannel {
 public:
  // Largest vector a file may announce (floats): 2^28 (1 GiB).
  static constexpr std::uint64_t kMaxValues = std::uint64_t{1} << 28;

  // Creates `directory` if needed (kIo if it cannot).
  static Result<std::unique_ptr<DirectoryCollusion>> open(
      const std::string& directory, std::chrono::milliseconds poll = std::chrono::milliseconds(2));

  Status publish(std::uint64_t round, std::size_t member, std::span<const float> values) override;
  Result<std::vector<SharedVector>> gather(std::uint64_t round, std::size_t members,
                                           std::chrono::milliseconds timeout) override;
  void forget_before(std::uint64_t round) override;

  // Parses one file's bytes (the format above); `name` is used in errors.
  static Result<std::vector<float>> decode(std::span<const std::uint8_t> bytes, const std::string& name);
  static std::vector<std::uint8_t> encode(std::span<const float> values);

 private:
  DirectoryCollusion(std::string directory, std::chrono::milliseconds poll)
      : directory_(std::move(directory)), poll_(poll) {}
  std::string directory_;
  std::chrono::milliseconds poll_;
};

}  // namespace ballot::attacks
