#include "runtime/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace ballot::runtime {
namespace {

Checkpoint sample() {
  Checkpoint checkpoint;
  checkpoint.round = 1234;
  checkpoint.sections["model"] = {1, 2, 3, 4};
  checkpoint.sections["optimizer"] = std::vector<std::uint8_t>(1000, 7);
  checkpoint.sections["empty"] = {};
  return checkpoint;
}

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_checkpoint_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST(Checkpoint, EncodeDecodeRoundTrip) {
  const auto bytes = encode_checkpoint(sample());
  auto decoded = decode_checkpoint(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(*decoded, sample());
}

TEST(Checkpoint, EveryTruncationAndEveryBitFlipIsRejected) {
  const auto bytes = encode_checkpoint(sample());
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    auto decoded = decode_checkpoint(std::span(bytes).first(length));
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  }
  for (std::size_t i = 0; i < bytes.size(); i += 7) {
    auto corrupted = bytes;
    corrupted[i] ^= 0x10;
    EXPECT_FALSE(decode_checkpoint(corrupted).ok()) << i;
  }
}

TEST(Checkpoint, LimitsAreCheckedBeforeAllocating) {
  CheckpointLimits tight;
  tight.max_total_bytes = 100;
  auto decoded = decode_checkpoint(encode_checkpoint(sample()), tight);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kLimitExceeded);
  tight = {};
  tight.max_sections = 2;
  EXPECT_EQ(decode_checkpoint(encode_checkpoint(sample()), tight).error().code, ErrorCode::kLimitExceeded);
}

TEST_F(CheckpointFiles, SaveIsAtomicReplaceWithPrivatePermissions) {
  const auto path = dir_ / "sub" / "latest.ckpt";
  ASSERT_TRUE(save_checkpoint(path, sample()).ok());
  auto second = sample();
  second.round = 2000;
  ASSERT_TRUE(save_checkpoint(path, second).ok());
  auto loaded = load_checkpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->round, 2000u);
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))  // no temporary file stays
    EXPECT_EQ(entry.path().filename(), "latest.ckpt");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(CheckpointFiles, MissingAndCorruptFilesGiveErrorsNamingThePath) {
  auto missing = load_checkpoint(dir_ / "none.ckpt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("none.ckpt"), std::string::npos);

  const auto path = dir_ / "torn.ckpt";
  ASSERT_TRUE(save_checkpoint(path, sample()).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  auto torn = load_checkpoint(path);
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.error().code, ErrorCode::kMalformed);
  EXPECT_NE(torn.error().message.find("torn.ckpt"), std::string::npos);
}

}  // namespace
}  // namespace ballot::runtime
