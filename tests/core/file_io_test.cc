#include "core/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace ballot {
namespace {

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_file_io_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FileIoTest, WrittenBytesReadBackAndReplaceTheOldFile) {
  const auto path = dir_ / "a" / "b.bin";  // the directories are created
  const std::vector<std::uint8_t> first{1, 2, 3, 4, 5};
  ASSERT_TRUE(write_file_atomically(path, first).ok());
  auto read = read_file(path, 5, "test file");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(*read, first);
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>{9}).ok());
  EXPECT_EQ(read_file(path, 5, "test file").value(), std::vector<std::uint8_t>{9});
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "a"))  // no temporary file stays
    EXPECT_EQ(entry.path().filename(), "b.bin");
  ASSERT_TRUE(write_file_atomically(path, {}).ok());
  EXPECT_TRUE(read_file(path, 0, "test file").value().empty());
}

TEST_F(FileIoTest, ModesAreTheCallers) {
  const auto secret = dir_ / "secret", shared = dir_ / "shared";
  ASSERT_TRUE(write_file_atomically(secret, std::vector<std::uint8_t>{1}).ok());
  ASSERT_TRUE(write_file_atomically(shared, std::vector<std::uint8_t>{1}, 0644).ok());
  struct stat s {};
  ASSERT_EQ(::stat(secret.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(shared.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0644u);
}

// Whoever may write into the directory cannot make the writer follow a link or reuse a file with
// its permissions: the temporary file has a fresh name and is created exclusively.
TEST_F(FileIoTest, NothingLeftAtATemporaryNameIsFollowedOrReused) {
  std::filesystem::create_directories(dir_);
  const auto path = dir_ / "server.ckpt", victim = dir_ / "victim.txt";
  std::ofstream(victim) << "keep me";
  std::filesystem::create_symlink(victim, path.string() + ".tmp");
  std::ofstream(path.string() + ".tmp.AAAAAA") << "left over";
  ::chmod((path.string() + ".tmp.AAAAAA").c_str(), 0666);
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>{7, 7}).ok());
  std::ifstream in(victim);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  EXPECT_EQ(read_file(path, 2, "test file").value(), (std::vector<std::uint8_t>{7, 7}));
  struct stat s {};
  ASSERT_EQ(::stat(path.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0600u);
}

// A writer killed mid-write leaves its temporary file; the next write of the path removes it once
// it is old enough that no write can still be going on, and leaves younger ones and other files.
TEST_F(FileIoTest, StaleTemporaryFilesOfThePathAreRemoved) {
  std::filesystem::create_directories(dir_);
  const auto path = dir_ / "latest.ckpt";
  const auto make = [&](const std::string& name, std::chrono::minutes age) {
    std::ofstream(dir_ / name) << "torn";
    std::filesystem::last_write_time(dir_ / name, std::filesystem::file_time_type::clock::now() - age);
  };
  make("latest.ckpt.tmp.Ab3dE9", std::chrono::minutes(60));    // a killed writer's, an hour ago
  make("latest.ckpt.tmp.Zz0000", std::chrono::minutes(1));     // maybe a write going on
  make("other.ckpt.tmp.Ab3dE9", std::chrono::minutes(60));     // another path's
  make("latest.ckpt.tmp.toolong1", std::chrono::minutes(60));  // not a temporary name
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>{1}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "latest.ckpt.tmp.Ab3dE9"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "latest.ckpt.tmp.Zz0000"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "other.ckpt.tmp.Ab3dE9"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "latest.ckpt.tmp.toolong1"));
}

// kRefuse (keys, certificates) never replaces what is there, a symlink included, and leaves no
// temporary file either way.
TEST_F(FileIoTest, RefuseNeverOverwrites) {
  std::filesystem::create_directories(dir_);
  const auto path = dir_ / "node-1.key", link = dir_ / "node-2.key";
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>{1}, 0600, IfExists::kRefuse).ok());
  const auto again = write_file_atomically(path, std::vector<std::uint8_t>{2}, 0600, IfExists::kRefuse);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(again.error().message.find("refusing to overwrite"), std::string::npos) << again.error().message;
  EXPECT_EQ(read_file(path, 1, "key").value(), std::vector<std::uint8_t>{1});
  std::filesystem::create_symlink(dir_ / "elsewhere", link);
  EXPECT_FALSE(write_file_atomically(link, std::vector<std::uint8_t>{3}, 0600, IfExists::kRefuse).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "elsewhere"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2u);  // the key and the link: no temporary file
}

TEST_F(FileIoTest, AFailedWriteLeavesTheOldFileAndNoTemporaryFile) {
  std::filesystem::create_directories(dir_ / "d");
  const auto path = dir_ / "d" / "f";
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>{1}).ok());
  std::filesystem::create_directories(dir_ / "d" / "g");  // a directory is not a file to rename onto
  const auto refused = write_file_atomically(dir_ / "d" / "g", std::vector<std::uint8_t>{2});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kIo);
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "d")) {
    ++entries;
    EXPECT_TRUE(entry.path().filename() == "f" || entry.path().filename() == "g") << entry.path();
  }
  EXPECT_EQ(entries, 2u);
  EXPECT_EQ(read_file(path, 1, "test file").value(), std::vector<std::uint8_t>{1});
}

TEST_F(FileIoTest, MissingLargeAndUnreadableFilesAreErrorsNamingThem) {
  const auto path = dir_ / "x.bin";
  auto missing = read_file(path, 10, "checkpoint");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("no checkpoint at '" + path.string() + "'"), std::string::npos);
  ASSERT_TRUE(write_file_atomically(path, std::vector<std::uint8_t>(11, 7)).ok());
  auto large = read_file(path, 10, "checkpoint");
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.error().code, ErrorCode::kLimitExceeded);
  EXPECT_NE(large.error().message.find(path.string()), std::string::npos);
  auto directory = read_file(dir_, 1 << 20, "checkpoint");  // a directory is not a file
  EXPECT_FALSE(directory.ok());
  auto nowhere = write_file_atomically("/proc/ballot-no-such-place/f", std::vector<std::uint8_t>{1});
  ASSERT_FALSE(nowhere.ok());
  EXPECT_NE(nowhere.error().message.find("/proc/ballot-no-such-place"), std::string::npos);
}

}  // namespace
}  // namespace ballot
