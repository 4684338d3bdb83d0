// DecisionLog: the server's write-ahead log of the decisions it sent since its latest checkpoint.
//
// The server appends each round's decision here before the decision leaves it, and starts the
// log afresh after each checkpoint. A restarted server loads its checkpoint and applies the logged
// decisions that follow it, so it resumes at the round the nodes reached: no node holds a decision
// its server forgot. (Without the log the server would redo those rounds from its checkpoint with
// the votes that happen to arrive first this time; a different decision would leave the nodes
// that had signed votes for the next round on the old model abstaining, as their signed record
// must, and the round could miss its quorum.)
//
// Durability: append() returns once the bytes are in the file (the kernel's page cache), which a
// killed process cannot lose; a power loss can. What is lost then is liveness, never safety: the
// server resumes further back and the nodes re-send their recorded votes or abstain.
//
// File (little-endian): "BALLOTDL" | version u32 (kDecisionLogVersion) | first round u64, then per decision:
// round u64 | payload length u64 | payload | SHA-256 of (round ‖ length ‖ payload).
// Read back it is untrusted: a record that is cut short, fails its digest or is not the next
// round ends the log there (a write the server never finished was never sent).
//
// Thread-safety: none (the server's loop owns it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"

namespace ballot::runtime {

// 3: its decisions are protocol version 5's (2: version 4's, whose state chain hashed a sparse
// direction's d floats). A log of another version is refused: the server does not start over it
// (runtime/roles.cc).
inline constexpr std::uint32_t kDecisionLogVersion = 3;

// Called for each intact decision, in order, with a view of its payload that lives for the call;
// returning false stops the scan there.
using DecisionVisitor = std::function<bool(std::uint64_t round, std::span<const std::uint8_t> payload)>;

struct DecisionLogScan {
  std::uint64_t first_round = 0;
  std::uint64_t decisions = 0;    // visited: rounds first_round, first_round + 1, … in order
  std::size_t dropped_bytes = 0;  // after the last intact record (a torn or damaged tail); 0 when stopped
};

// Reads the log at `path` one record at a time, so a server replays a log of many large decisions
// holding one of them. kNotFound when there is no log; kIo naming the path when it cannot be read;
// kMalformed naming the path for a bad header (not a decision log, or another version).
Result<DecisionLogScan> scan_decision_log(const std::filesystem::path& path, const DecisionVisitor& visit);
// The same over bytes in memory.
Result<DecisionLogScan> scan_decision_log(std::span<const std::uint8_t> bytes, const DecisionVisitor& visit);

// The whole log in memory, for tools and tests (the server replays with scan_decision_log).
struct LoggedDecision {
  std::uint64_t round = 0;
  std::vector<std::uint8_t> payload;
};
struct DecisionLogContents {
  std::uint64_t first_round = 0;
  std::vector<LoggedDecision> decisions;  // rounds first_round, first_round + 1, … in order
  std::size_t dropped_bytes = 0;          // after the last intact record (a torn or damaged tail)
};
Result<DecisionLogContents> decode_decision_log(std::span<const std::uint8_t> bytes);
Result<DecisionLogContents> read_decision_log(const std::filesystem::path& path);

// One record's bytes (what append() writes).
std::vector<std::uint8_t> encode_decision_record(std::uint64_t round, std::span<const std::uint8_t> payload);
std::vector<std::uint8_t> encode_decision_log_header(std::uint64_t first_round);

// The log beside a checkpoint file: "<checkpoint>.decisions".
std::filesystem::path decision_log_path(const std::filesystem::path& checkpoint_path);

class DecisionLog {
 public:
  // Replaces the file at `path` (atomically) with an empty log of decisions from `first_round`.
  static Result<DecisionLog> start(const std::filesystem::path& path, std::uint64_t first_round);
  DecisionLog(DecisionLog&& other) noexcept;
  DecisionLog& operator=(DecisionLog&& other) noexcept;
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;
  ~DecisionLog();

  // Appends the decision of `round`, which must be the next one. Errors name the path.
  Status append(std::uint64_t round, std::span<const std::uint8_t> payload);
  std::uint64_t next_round() const noexcept { return next_round_; }

 private:
  DecisionLog(std::filesystem::path path, int fd, std::uint64_t first_round);
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t next_round_ = 0;
};

}  // namespace ballot::runtime
