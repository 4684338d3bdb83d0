#include "runtime/signed_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "transport/crypto.h"

namespace ballot::runtime {
namespace {

using transport::MessageType;

std::shared_ptr<const std::vector<std::uint8_t>> bytes(std::uint8_t fill, std::size_t size = 40) {
  return std::make_shared<const std::vector<std::uint8_t>>(size, fill);
}

class SignedRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_signed_record_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A fresh signer each time: as a restarted process would have (sequence from its clock).
  transport::OutboundFrame seal(MessageType type, std::uint64_t round,
                                std::shared_ptr<const std::vector<std::uint8_t>> p) {
    transport::Signer signer(key_, 1, 3, transport::Role::kNode);
    ++seals_;
    return signer.seal(type, round, std::move(p));
  }
  Result<std::optional<transport::OutboundFrame>> once(SignedRecord& record, MessageType type, std::uint64_t round,
                                                       std::shared_ptr<const std::vector<std::uint8_t>> p) {
    return record.seal_once(type, round, std::move(p),
                            [&](auto t, auto r, auto q) { return seal(t, r, std::move(q)); });
  }

  std::filesystem::path dir_;
  transport::SigningKey key_ = transport::SigningKey::generate().value();
  int seals_ = 0;
};

// After a restart (the record read back from its file) the node re-sends exactly the bytes it
// signed before for the same payload, and abstains for a different one: never a second message.
TEST_F(SignedRecordTest, SameBytesOrNothingAcrossARestart) {
  const auto path = dir_ / "node-2.signed";
  transport::OutboundFrame first;
  {
    auto record = SignedRecord::open(path, 3, 1, nullptr);
    ASSERT_TRUE(record.ok()) << record.error().to_string();
    auto sealed = once(*record, MessageType::kVote, 7, bytes(1));
    ASSERT_TRUE(sealed.ok() && *sealed);
    first = **sealed;
    ASSERT_TRUE(once(*record, MessageType::kPartitionSigns, 7, bytes(5)).ok());
  }
  EXPECT_EQ(seals_, 2);
  const auto verify = key_.verify_key();
  auto record = SignedRecord::open(path, 3, 1, &verify);
  ASSERT_TRUE(record.ok()) << record.error().to_string();
  EXPECT_EQ(record->size(), 2u);
  auto again = once(*record, MessageType::kVote, 7, bytes(1));
  ASSERT_TRUE(again.ok() && *again);
  EXPECT_EQ((*again)->to_bytes(), first.to_bytes());  // the same signed bytes
  EXPECT_EQ(seals_, 2);                               // nothing newly signed
  auto other = once(*record, MessageType::kVote, 7, bytes(2));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);  // a different vote for round 7: abstain
  EXPECT_EQ(record->abstained(), 1u);
  auto next = once(*record, MessageType::kVote, 8, bytes(2));
  ASSERT_TRUE(next.ok() && *next);  // a new round signs anew
  EXPECT_EQ(seals_, 3);
}

// A message whose record could not be written is not held either: sealing it again (a caller that
// went on after the error) writes again instead of handing out a frame the file does not know.
TEST_F(SignedRecordTest, AnEntryIsHeldOnlyOnceItIsOnDisk) {
  const auto path = dir_ / "state" / "node-2.signed";
  auto record = SignedRecord::open(path, 3, 1, nullptr);
  ASSERT_TRUE(record.ok()) << record.error().to_string();
  std::ofstream(dir_ / "state") << "a file where the directory should be";
  auto refused = once(*record, MessageType::kVote, 7, bytes(1));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kIo);
  EXPECT_EQ(record->size(), 0u);
  EXPECT_EQ(record->find(MessageType::kVote, 7), nullptr);
  auto again = once(*record, MessageType::kVote, 7, bytes(1));
  EXPECT_FALSE(again.ok());  // still not on disk: still no frame
  std::filesystem::remove(dir_ / "state");
  auto written = once(*record, MessageType::kVote, 7, bytes(1));
  ASSERT_TRUE(written.ok() && *written) << (written.ok() ? "" : written.error().to_string());
  EXPECT_EQ(record->size(), 1u);
  const auto verify = key_.verify_key();
  EXPECT_EQ(SignedRecord::open(path, 3, 1, &verify).value().size(), 1u);
}

TEST_F(SignedRecordTest, OldRoundsLeaveTheWindow) {
  auto record = SignedRecord::open(dir_ / "r.signed", 3, 1, nullptr, /*window=*/4);
  ASSERT_TRUE(record.ok());
  for (std::uint64_t round = 0; round < 20; ++round)
    ASSERT_TRUE(once(*record, MessageType::kVote, round, bytes(1)).ok());
  EXPECT_EQ(record->size(), 5u);
  EXPECT_EQ(record->find(MessageType::kVote, 14), nullptr);
  EXPECT_NE(record->find(MessageType::kVote, 15), nullptr);
}

// Read back it is untrusted: damaged, foreign or forged files are errors naming the file.
TEST_F(SignedRecordTest, DamagedOrForeignRecordsAreRefused) {
  const auto path = dir_ / "node-2.signed";
  {
    auto record = SignedRecord::open(path, 3, 1, nullptr);
    ASSERT_TRUE(record.ok());
    ASSERT_TRUE(once(*record, MessageType::kVote, 1, bytes(1)).ok());
  }
  EXPECT_FALSE(SignedRecord::open(path, 4, 1, nullptr).ok());  // another node's
  EXPECT_FALSE(SignedRecord::open(path, 3, 2, nullptr).ok());  // another job's
  const auto stranger_key = transport::SigningKey::generate().value();
  const auto& stranger = stranger_key.verify_key();
  auto forged = SignedRecord::open(path, 3, 1, &stranger);
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.error().message.find(path.string()), std::string::npos) << forged.error().message;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  auto truncated = SignedRecord::open(path, 3, 1, nullptr);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error().code, ErrorCode::kMalformed);
}

TEST(SignedRecordCodec, BoundsAreCheckedBeforeReading) {
  EXPECT_FALSE(decode_signed_record({}).ok());
  auto empty = encode_signed_record({});
  ASSERT_TRUE(decode_signed_record(empty).ok());
  // A huge announced count is refused from the header alone.
  auto huge = empty;
  huge[12] = huge[13] = huge[14] = huge[15] = 0xFF;
  auto decoded = decode_signed_record(huge);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kLimitExceeded);
  auto one = empty;
  one[12] = 1;
  EXPECT_FALSE(decode_signed_record(one).ok());  // announces an entry it does not hold
  auto version = empty;
  version[8] = 2;
  EXPECT_FALSE(decode_signed_record(version).ok());
}

}  // namespace
}  // namespace ballot::runtime
