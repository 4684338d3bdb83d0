#include "runtime/decision_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace ballot::runtime {
namespace {

std::vector<std::uint8_t> payload(std::uint64_t round, std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(round * 31 + i);
  return bytes;
}

class DecisionLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_decision_log_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = decision_log_path(dir_ / "server.ckpt");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::uint8_t> file_bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write_bytes(const std::vector<std::uint8_t>& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_, path_;
};

TEST_F(DecisionLogTest, PathIsBesideTheCheckpoint) {
  EXPECT_EQ(decision_log_path("/var/lib/ballot/run.ckpt"), std::filesystem::path("/var/lib/ballot/run.ckpt.decisions"));
}

TEST_F(DecisionLogTest, AppendedDecisionsReadBackInOrder) {
  auto log = DecisionLog::start(path_, 20);
  ASSERT_TRUE(log.ok()) << log.error().to_string();
  for (std::uint64_t round = 20; round < 25; ++round) ASSERT_TRUE(log->append(round, payload(round, 100 + round)).ok());
  EXPECT_EQ(log->next_round(), 25u);
  auto read = read_decision_log(path_);
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->first_round, 20u);
  EXPECT_EQ(read->dropped_bytes, 0u);
  ASSERT_EQ(read->decisions.size(), 5u);
  for (std::uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(read->decisions[i].round, 20 + i);
    EXPECT_EQ(read->decisions[i].payload, payload(20 + i, 120 + i));
  }
}

TEST_F(DecisionLogTest, StartReplacesTheOldLogAndEmptyPayloadsRoundTrip) {
  {
    auto log = DecisionLog::start(path_, 0);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE(log->append(0, payload(0, 50)).ok());
  }
  auto log = DecisionLog::start(path_, 10);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->append(10, {}).ok());
  auto read = read_decision_log(path_);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->first_round, 10u);
  ASSERT_EQ(read->decisions.size(), 1u);
  EXPECT_TRUE(read->decisions[0].payload.empty());
}

TEST_F(DecisionLogTest, AppendingAnyRoundButTheNextIsRefused) {
  auto log = DecisionLog::start(path_, 5);
  ASSERT_TRUE(log.ok());
  auto skipped = log->append(6, payload(6, 8));
  ASSERT_FALSE(skipped.ok());
  EXPECT_EQ(skipped.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(skipped.error().message.find("round 6 appended, 5 expected"), std::string::npos);
  ASSERT_TRUE(log->append(5, payload(5, 8)).ok());
  EXPECT_FALSE(log->append(5, payload(5, 8)).ok());
  auto read = read_decision_log(path_);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->decisions.size(), 1u);
}

// A write the server never finished (killed in the middle of append) was never sent: the log
// ends before it, at every possible cut.
TEST_F(DecisionLogTest, ATornTailEndsTheLogAtTheLastIntactRecord) {
  auto log = DecisionLog::start(path_, 3);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->append(3, payload(3, 64)).ok());
  const std::size_t one = file_bytes().size();
  ASSERT_TRUE(log->append(4, payload(4, 64)).ok());
  const auto whole = file_bytes();
  for (std::size_t cut = one; cut < whole.size(); ++cut) {
    auto read = decode_decision_log(std::span(whole).first(cut));
    ASSERT_TRUE(read.ok()) << cut;
    ASSERT_EQ(read->decisions.size(), 1u) << cut;
    EXPECT_EQ(read->dropped_bytes, cut - one) << cut;
    // The file is read record by record the same way.
    write_bytes(std::vector<std::uint8_t>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut)));
    auto scanned = read_decision_log(path_);
    ASSERT_TRUE(scanned.ok()) << cut;
    ASSERT_EQ(scanned->decisions.size(), 1u) << cut;
    EXPECT_EQ(scanned->decisions[0].payload, payload(3, 64)) << cut;
    EXPECT_EQ(scanned->dropped_bytes, cut - one) << cut;
  }
}

// The server replays through scan_decision_log: each payload is visited in order, and the visitor
// can stop the scan (a decision that does not apply), which then reports no torn tail.
TEST_F(DecisionLogTest, AScanVisitsEachRecordInOrderAndStopsWhenAsked) {
  auto log = DecisionLog::start(path_, 40);
  ASSERT_TRUE(log.ok());
  for (std::uint64_t round = 40; round < 46; ++round) ASSERT_TRUE(log->append(round, payload(round, 3 * round)).ok());
  std::vector<std::uint64_t> seen;
  auto scan = scan_decision_log(path_, [&](std::uint64_t round, std::span<const std::uint8_t> bytes) {
    EXPECT_EQ(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), payload(round, 3 * round));
    seen.push_back(round);
    return round < 42;
  });
  ASSERT_TRUE(scan.ok()) << scan.error().to_string();
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{40, 41, 42}));
  EXPECT_EQ(scan->first_round, 40u);
  EXPECT_EQ(scan->decisions, 3u);
  EXPECT_EQ(scan->dropped_bytes, 0u);
  const auto bytes = file_bytes();
  std::uint64_t in_memory = 0;
  auto whole = scan_decision_log(bytes, [&](std::uint64_t, std::span<const std::uint8_t>) {
    ++in_memory;
    return true;
  });
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->decisions, 6u);
  EXPECT_EQ(in_memory, 6u);
}

// Something at the log's path that is not a regular file is an error naming it, not a read that
// blocks (a FIFO) or never ends.
TEST_F(DecisionLogTest, AFifoOrADirectoryIsAnErrorNamingThePath) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  auto fifo = read_decision_log(path_);
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.error().code, ErrorCode::kIo);
  EXPECT_NE(fifo.error().message.find(path_.string()), std::string::npos);
  std::filesystem::remove(path_);
  std::filesystem::create_directory(path_);
  auto directory = read_decision_log(path_);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find(path_.string()), std::string::npos);
}

TEST_F(DecisionLogTest, ADamagedOrOutOfOrderRecordEndsTheLogThere) {
  auto bytes = encode_decision_log_header(7);
  const auto first = encode_decision_record(7, payload(7, 30));
  const auto second = encode_decision_record(8, payload(8, 30));
  bytes.insert(bytes.end(), first.begin(), first.end());
  const std::size_t intact = bytes.size();
  bytes.insert(bytes.end(), second.begin(), second.end());
  auto flipped = bytes;
  flipped[intact + 20] ^= 0x01;  // a payload byte of round 8
  auto read = decode_decision_log(flipped);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->decisions.size(), 1u);
  EXPECT_EQ(read->dropped_bytes, second.size());
  // Round 9 where 8 belongs: not the next round.
  auto gap = encode_decision_log_header(7);
  const auto ninth = encode_decision_record(9, payload(9, 30));
  gap.insert(gap.end(), first.begin(), first.end());
  gap.insert(gap.end(), ninth.begin(), ninth.end());
  read = decode_decision_log(gap);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->decisions.size(), 1u);
  // A length far past the end allocates nothing and ends the log.
  auto huge = encode_decision_log_header(7);
  auto lying = encode_decision_record(7, payload(7, 30));
  lying[8 + 7] = 0x7f;  // the top byte of the length
  huge.insert(huge.end(), lying.begin(), lying.end());
  read = decode_decision_log(huge);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->decisions.empty());
  EXPECT_EQ(read->dropped_bytes, lying.size());
}

TEST_F(DecisionLogTest, ForeignOrMissingFilesAreErrorsNamingThePath) {
  auto missing = read_decision_log(path_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  write_bytes({'B', 'A', 'L', 'L', 'O', 'T', 'C', 'K', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  auto foreign = read_decision_log(path_);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().code, ErrorCode::kMalformed);
  EXPECT_NE(foreign.error().message.find(path_.string()), std::string::npos);
  EXPECT_NE(foreign.error().message.find("bad magic"), std::string::npos);
  auto header = encode_decision_log_header(0);
  for (const std::uint8_t version : {1, 2}) {  // protocol version 3's and 4's decisions
    header[8] = version;
    write_bytes(header);
    auto old = read_decision_log(path_);
    ASSERT_FALSE(old.ok());
    EXPECT_NE(old.error().message.find("version " + std::to_string(version) + ", this build reads version 3"),
              std::string::npos);
  }
  write_bytes({'B', 'A'});
  EXPECT_FALSE(read_decision_log(path_).ok());
}

TEST_F(DecisionLogTest, AnUnwritablePlaceIsAnErrorNamingIt) {
  auto log = DecisionLog::start("/proc/ballot-no-such-dir/x.decisions", 0);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.error().message.find("/proc/ballot-no-such-dir"), std::string::npos);
}

}  // namespace
}  // namespace ballot::runtime
