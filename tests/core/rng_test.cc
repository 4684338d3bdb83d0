#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/philox.h"

namespace ballot {
namespace {

TEST(Rng, SameSeedAndStreamGiveTheSameSequence) {
  Rng a(42, 7), b(42, 7), c(42, 8), d(43, 7);
  bool differs_by_stream = false, differs_by_seed = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    differs_by_stream |= x != c.next_u32();
    differs_by_seed |= x != d.next_u32();
  }
  EXPECT_TRUE(differs_by_stream);
  EXPECT_TRUE(differs_by_seed);
}

TEST(Rng, RandomAccessMatchesSequentialAndSeek) {
  Rng rng(9, 3);
  std::vector<std::uint32_t> words;
  for (int i = 0; i < 37; ++i) words.push_back(rng.next_u32());
  for (std::uint64_t i = 0; i < words.size(); ++i) EXPECT_EQ(philox_stream_word(9, 3, i), words[i]);
  rng.seek(10);
  EXPECT_EQ(rng.next_u32(), words[10]);
  EXPECT_EQ(rng.position(), 11u);
}

// Each Philox block is computed once for its four words; seeks anywhere (back into the block
// just read, ahead past it, to a block boundary) and 64-bit draws across blocks read the stream.
TEST(Rng, SeeksAndWideDrawsReadTheStreamAcrossBlocks) {
  Rng rng(0xDEADBEEFCAFEull, 77);
  for (const std::uint64_t at : {0ull, 2ull, 1ull, 3ull, 4ull, 3ull, 1000003ull, 7ull, 8ull, 6ull, (1ull << 34) + 1}) {
    rng.seek(at);
    EXPECT_EQ(rng.next_u32(), philox_stream_word(0xDEADBEEFCAFEull, 77, at)) << at;
    const std::uint64_t wide = rng.next_u64();  // words at + 1 and at + 2, perhaps in the next block
    EXPECT_EQ(wide, philox_stream_word(0xDEADBEEFCAFEull, 77, at + 1) |
                        (std::uint64_t{philox_stream_word(0xDEADBEEFCAFEull, 77, at + 2)} << 32))
        << at;
    EXPECT_EQ(rng.position(), at + 3);
  }
  Rng copy = rng;  // a copy carries its block along and stays in step
  EXPECT_EQ(copy.next_u32(), rng.next_u32());
}

TEST(Rng, StreamIdsSeparateStructuredCoordinates) {
  std::set<std::uint64_t> ids;
  for (std::uint64_t round = 0; round < 50; ++round) {
    for (std::uint64_t node = 0; node < 50; ++node) ids.insert(Rng::stream_id({round, node}));
  }
  EXPECT_EQ(ids.size(), 2500u);
  EXPECT_NE(Rng::stream_id({1, 2}), Rng::stream_id({2, 1}));
  EXPECT_EQ(Rng(5).substream(1).stream(), Rng(5).substream(1).stream());
}

TEST(Rng, UniformIntIsInRangeAndRoughlyUniform) {
  Rng rng(1);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const auto x = rng.uniform_int(10);
    ASSERT_LT(x, 10u);
    ++counts[x];
  }
  // Each bucket expects 10000 with sd ~95; 6 sd tolerance for a fixed seed.
  for (int c : counts) EXPECT_NEAR(c, 10000, 600);
}

TEST(Rng, UniformFloatsAndNormalMoments) {
  Rng rng(2);
  double sum = 0, sum_sq = 0, normal_sum = 0, normal_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const float f = rng.uniform_float();
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    sum += u;
    sum_sq += u * u;
    const double z = rng.normal();
    ASSERT_TRUE(std::isfinite(z));
    normal_sum += z;
    normal_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - 0.25, 1.0 / 12 - 0.0, 0.005);
  EXPECT_NEAR(normal_sum / n, 0.0, 0.01);
  EXPECT_NEAR(normal_sq / n, 1.0, 0.01);
}

TEST(Rng, BernoulliAndShuffle) {
  Rng rng(3);
  int ones = 0;
  for (int i = 0; i < 100000; ++i) ones += rng.bernoulli(0.3);
  EXPECT_NEAR(ones, 30000, 900);

  std::vector<int> items(20);
  std::iota(items.begin(), items.end(), 0);
  auto copy = items;
  Rng(4).shuffle(std::span<int>(items));
  Rng(4).shuffle(std::span<int>(copy));
  EXPECT_EQ(items, copy);
  std::set<int> unique(items.begin(), items.end());
  EXPECT_EQ(unique.size(), 20u);
}

// The stream must be the same in another process (another address space, another start-up):
// a cluster relies on it to agree on random choices from the seed alone.
TEST(Rng, StreamIsIdenticalInAnotherProcess) {
  const std::string command = std::string(BALLOT_RNG_DUMP) + " 123456789 987654321 64";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  Rng rng(123456789, 987654321);
  unsigned long value = 0;
  int read = 0;
  while (std::fscanf(pipe, "%lu", &value) == 1) {
    EXPECT_EQ(value, rng.next_u32()) << "word " << read;
    ++read;
  }
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(read, 64);
}

}  // namespace
}  // namespace ballot
