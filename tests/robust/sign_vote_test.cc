#include "robust/sign_vote.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"

namespace ballot::robust {
namespace {

std::vector<BitVector> random_votes(std::size_t n, std::size_t size, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<BitVector> out;
  for (std::size_t i = 0; i < n; ++i) {
    BitVector v(size);
    for (std::size_t c = 0; c < size; ++c) v.set(c, rng.bernoulli(0.5));
    out.push_back(std::move(v));
  }
  return out;
}

TEST(SignVote, MatchesCountingAndTiesGoToPlusOne) {
  for (std::size_t n : {1u, 2u, 4u, 7u, 16u}) {
    const auto votes = random_votes(n, 333, n);
    auto result = majority_vote(votes);
    ASSERT_TRUE(result.ok());
    for (std::size_t c = 0; c < 333; ++c) {
      std::size_t plus = 0;
      for (const auto& v : votes) plus += v.get(c);
      ASSERT_EQ(result->get(c), 2 * plus >= n) << c;
    }
  }
}

TEST(SignVote, WeightedMatchesCounting) {
  const auto votes = random_votes(5, 200, 3);
  const std::vector<std::uint32_t> weights{3, 1, 1, 0, 2};
  auto result = weighted_majority_vote(votes, weights);
  ASSERT_TRUE(result.ok());
  for (std::size_t c = 0; c < 200; ++c) {
    std::uint32_t plus = 0;
    for (std::size_t i = 0; i < 5; ++i) plus += votes[i].get(c) ? weights[i] : 0;
    ASSERT_EQ(result->get(c), 2 * plus >= 7);
  }
}

TEST(SignVote, MinorityCannotFlipAUnanimousHonestMajority) {
  // b < n/2 adversaries sending the negated signs never change the outcome.
  const std::size_t n = 9, b = 4;
  std::vector<BitVector> votes(n - b, random_votes(1, 500, 8)[0]);
  BitVector attack = votes[0];
  attack.flip();
  for (std::size_t i = 0; i < b; ++i) votes.push_back(attack);
  auto result = majority_vote(votes);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, votes[0]);
}

TEST(SignVote, ErrorsInsteadOfAsserts) {
  EXPECT_EQ(majority_vote(std::span<const BitVector>{}).error().code, ErrorCode::kPrecondition);
  std::vector<BitVector> mixed{BitVector(10), BitVector(11)};
  auto sizes = majority_vote(mixed);
  ASSERT_FALSE(sizes.ok());
  EXPECT_NE(sizes.error().message.find("vote 1"), std::string::npos);
  std::vector<BitVector> two{BitVector(10), BitVector(10)};
  EXPECT_FALSE(weighted_majority_vote(two, std::vector<std::uint32_t>{1}).ok());
  EXPECT_FALSE(weighted_majority_vote(two, std::vector<std::uint32_t>{0, 0}).ok());
  EXPECT_FALSE(weighted_majority_vote(two, std::vector<std::uint32_t>{0x80000000u, 0x80000000u}).ok());
  const BitVector* null_votes[] = {nullptr};
  EXPECT_FALSE(majority_vote(std::span<const BitVector* const>(null_votes)).ok());
}

}  // namespace
}  // namespace ballot::robust
