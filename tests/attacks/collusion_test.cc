#include "attacks/collusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "attacks/gradient_attacks.h"

namespace ballot::attacks {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ballot-collusion-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<float> vec(float base, std::size_t d = 5) {
  std::vector<float> v(d);
  for (std::size_t i = 0; i < d; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// The same behaviour for both implementations: publish from "processes", gather, time out, forget.
void exercise(CollusionChannel& a, CollusionChannel& b, CollusionChannel& reader) {
  ASSERT_TRUE(a.publish(3, 7, vec(70)).ok());
  EXPECT_EQ(reader.gather(3, 2, 30ms).error().code, ErrorCode::kTimeout);
  std::thread late([&] {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(b.publish(3, 2, vec(20)).ok());
  });
  auto both = reader.gather(3, 2, 5000ms);
  late.join();
  ASSERT_TRUE(both.ok()) << both.error().message;
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].member, 2u);  // ascending by member
  EXPECT_EQ((*both)[0].values, vec(20));
  EXPECT_EQ((*both)[1].member, 7u);
  EXPECT_EQ((*both)[1].values, vec(70));
  // Republishing replaces; other rounds are separate; special values survive the trip.
  const std::vector<float> special = {-0.0f, std::numeric_limits<float>::infinity(), 1e-40f, -3.5f};
  ASSERT_TRUE(a.publish(3, 7, special).ok());
  auto replaced = reader.gather(3, 2, 100ms);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(std::memcmp((*replaced)[1].values.data(), special.data(), special.size() * sizeof(float)), 0);
  ASSERT_TRUE(a.publish(4, 1, vec(1, 0)).ok());
  EXPECT_EQ(reader.gather(4, 1, 100ms)->at(0).values.size(), 0u);
  EXPECT_TRUE(reader.gather(9, 0, 1ms).ok());
  reader.forget_before(4);
  EXPECT_EQ(reader.gather(3, 1, 10ms).error().code, ErrorCode::kTimeout);
  EXPECT_TRUE(reader.gather(4, 1, 10ms).ok());
}

TEST(MemoryCollusion, PublishGatherTimeoutForget) {
  MemoryCollusion channel;
  exercise(channel, channel, channel);
}

TEST(DirectoryCollusion, PublishGatherTimeoutForgetAcrossInstances) {
  TempDir dir;
  auto a = DirectoryCollusion::open((dir.path() / "side").string(), 1ms);
  auto b = DirectoryCollusion::open((dir.path() / "side").string(), 1ms);
  auto reader = DirectoryCollusion::open((dir.path() / "side").string(), 1ms);
  ASSERT_TRUE(a.ok() && b.ok() && reader.ok());
  exercise(**a, **b, **reader);
  EXPECT_FALSE(fs::exists(dir.path() / "side" / "r3"));
}

TEST(DirectoryCollusion, HostileFilesAreErrorsNotCrashes) {
  TempDir dir;
  auto channel = DirectoryCollusion::open(dir.path().string()).value();
  EXPECT_EQ(DirectoryCollusion::decode(DirectoryCollusion::encode(vec(1)), "x").value(), vec(1));
  auto bytes = DirectoryCollusion::encode(vec(1));
  bytes.pop_back();
  EXPECT_EQ(DirectoryCollusion::decode(bytes, "x").error().code, ErrorCode::kMalformed);
  bytes = DirectoryCollusion::encode(vec(1));
  bytes[0] = 'X';
  EXPECT_EQ(DirectoryCollusion::decode(bytes, "x").error().code, ErrorCode::kMalformed);
  bytes = DirectoryCollusion::encode({});
  bytes[15] = 0xff;  // announces 2^63 values
  EXPECT_EQ(DirectoryCollusion::decode(bytes, "x").error().code, ErrorCode::kLimitExceeded);
  EXPECT_EQ(DirectoryCollusion::decode({}, "x").error().code, ErrorCode::kMalformed);

  // A garbage file where a member's vector should be: gather reports it, naming the file.
  fs::create_directories(dir.path() / "r0");
  std::ofstream(dir.path() / "r0" / "m4.vec") << "not a vector";
  std::ofstream(dir.path() / "r0" / "stranger.txt") << "ignored";
  auto gathered = channel->gather(0, 1, 100ms);
  ASSERT_FALSE(gathered.ok());
  EXPECT_EQ(gathered.error().code, ErrorCode::kMalformed);
  EXPECT_NE(gathered.error().message.find("m4.vec"), std::string::npos);
  // A path that cannot be a directory.
  std::ofstream(dir.path() / "file") << "x";
  EXPECT_EQ(DirectoryCollusion::open((dir.path() / "file").string()).error().code, ErrorCode::kIo);
}

// Only the canonical file name of a member counts: "m07.vec" beside "m7.vec" is not a second
// member (gather promises distinct members), and ids past 2^32 are strangers.
TEST(DirectoryCollusion, NonCanonicalMemberNamesAreIgnored) {
  TempDir dir;
  auto channel = DirectoryCollusion::open(dir.path().string(), 1ms).value();
  ASSERT_TRUE(channel->publish(2, 7, vec(7)).ok());
  const auto bytes = DirectoryCollusion::encode(vec(9));
  for (const char* name : {"m07.vec", "m0007.vec", "m4294967296.vec", "m18446744073709551616.vec"}) {
    std::ofstream(dir.path() / "r2" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_EQ(channel->gather(2, 2, 20ms).error().code, ErrorCode::kTimeout);  // still one member
  auto one = channel->gather(2, 1, 20ms);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].member, 7u);
  ASSERT_TRUE(channel->publish(2, 0, vec(0)).ok());  // "m0.vec" is canonical
  EXPECT_EQ(channel->gather(2, 2, 20ms)->size(), 2u);
}

TEST(Collusion, AlieFromTheCoalitionsOwnGradients) {
  // Three colluding processes share their honest gradients and all craft the same ALIE vector.
  MemoryCollusion channel;
  const std::size_t n = 10, m = 3;
  std::vector<std::vector<float>> own = {vec(0), vec(2), vec(7)};
  std::vector<std::vector<float>> crafted(m);
  std::vector<std::thread> attackers;
  for (std::size_t k = 0; k < m; ++k) {
    attackers.emplace_back([&, k] {
      ASSERT_TRUE(channel.publish(0, k, own[k]).ok());
      auto view = channel.gather(0, m, 5000ms);
      ASSERT_TRUE(view.ok());
      std::vector<std::span<const float>> rows;
      for (const auto& shared : *view) rows.emplace_back(shared.values);
      GradientContext ctx{*robust::InputMatrix::from_rows(rows), own[k], n, m};
      Rng rng(k);
      craft_gradient(*Behaviour::parse("alie"), ctx, rng, crafted[k]);
    });
  }
  for (auto& t : attackers) t.join();
  EXPECT_EQ(crafted[0], crafted[1]);
  EXPECT_EQ(crafted[1], crafted[2]);
  // mean = base 3, population std of {0, 2, 7} = sqrt(26/3); z = alie_z(10, 3).
  const double z = alie_z(n, m);
  EXPECT_NEAR(crafted[0][0], 3 - z * std::sqrt(26.0 / 3), 1e-5);
}

}  // namespace
}  // namespace ballot::attacks
