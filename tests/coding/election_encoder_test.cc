#include "coding/election_encoder.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace ballot::coding {
namespace {

std::vector<BitVector> random_signs(std::size_t n, std::size_t d, Rng& rng) {
  std::vector<BitVector> signs(n, BitVector(d));
  for (auto& s : signs)
    for (std::size_t c = 0; c < d; ++c) s.set(c, rng.bernoulli(0.5));
  return signs;
}

// Per coordinate: +1 iff at least half of the counted inputs are +1 (ties and empty → +1).
bool brute_majority(const std::vector<const BitVector*>& inputs, std::size_t c) {
  std::size_t plus = 0;
  for (const auto* in : inputs) plus += in->get(c);
  return 2 * plus >= inputs.size();
}

AllocationMatrix random_code(std::size_t n, Rng& rng) {
  AllocationMatrix g(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) g.set(i, j, rng.bernoulli(0.4));
  return g;
}

TEST(ElectionEncoder, ReplicatedMatchesBruteForcePerCoordinate) {
  Rng rng(1);
  for (const std::size_t d : {0u, 1u, 63u, 64u, 65u, 1000u}) {
    for (const std::size_t n : {1u, 4u, 9u}) {
      const auto g = random_code(n, rng);
      const auto signs = random_signs(n, d, rng);
      std::vector<BitVector> votes;
      BitVector out;
      elect_replicated(g, signs, votes, out);
      ASSERT_EQ(out.size(), d);
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<const BitVector*> row;
        for (const auto j : g.row(i)) row.push_back(&signs[j]);
        for (std::size_t c = 0; c < d; ++c) ASSERT_EQ(votes[i].get(c), brute_majority(row, c));
      }
      std::vector<const BitVector*> all;
      for (const auto& v : votes) all.push_back(&v);
      for (std::size_t c = 0; c < d; ++c) ASSERT_EQ(out.get(c), brute_majority(all, c));
      EXPECT_TRUE(out.padding_is_clear());
    }
  }
}

TEST(ElectionEncoder, IdentityIsSignSgdWithMajorityVote) {
  Rng rng(2);
  const auto signs = random_signs(7, 300, rng);
  std::vector<BitVector> votes;
  BitVector out, plain;
  elect_replicated(AllocationMatrix::identity(7), signs, votes, out);
  decode(signs, plain);
  EXPECT_EQ(out, plain);
}

TEST(ElectionEncoder, EmptyRowVotesAllPlusOne) {
  const auto g = AllocationMatrix::from_rows(2, {{}, {0, 1}}).value();
  const std::vector<BitVector> signs{BitVector(70, false), BitVector(70, false)};
  BitVector vote;
  encode_replicated(g, 0, signs, vote);
  EXPECT_EQ(vote.count_ones(), 70u);
  encode_replicated(g, 1, signs, vote);
  EXPECT_EQ(vote.count_ones(), 0u);
}

TEST(ElectionEncoder, ExchangeCountsOnlyValidInputsAndRecordsThem) {
  Rng rng(3);
  const std::size_t n = 6, d = 130;
  const auto g = AllocationMatrix::from_rows(n, {{0, 1, 2, 3, 4}, {}, {}, {}, {}, {}}).value();
  const auto signs = random_signs(n, d, rng);
  const BitVector short_vector(d - 1, true);
  BitVector other = signs[3];
  other.flip();
  const std::vector<ExchangeInput> inputs{
      {0, &signs[0]},      // counted
      {5, &signs[5]},      // not in row
      {9, &signs[0]},      // out of range
      {1, &short_vector},  // wrong size
      {2, nullptr},        // announced, unusable
      {3, &signs[3]},      // equivocation ...
      {3, &other},         // ... with a different vector
      {3, &signs[3]},      // ... and again: still rejected
      {4, &signs[4]},      // counted
      {4, &signs[4]},      // identical duplicate: counted once
  };
  const auto vote = encode_exchange(g, 0, d, inputs);
  EXPECT_EQ(vote.counted, (std::vector<std::uint32_t>{0, 4}));
  EXPECT_EQ(vote.missing, (std::vector<std::uint32_t>{1, 2, 3}));
  const std::vector<std::pair<std::uint32_t, InputRejection>> rejected{
      {5, InputRejection::kNotInRow}, {9, InputRejection::kNotInRow},     {1, InputRejection::kWrongSize},
      {2, InputRejection::kNull},     {3, InputRejection::kEquivocation}, {3, InputRejection::kEquivocation}};
  EXPECT_EQ(vote.rejected, rejected);
  for (std::size_t c = 0; c < d; ++c) ASSERT_EQ(vote.vote.get(c), brute_majority({&signs[0], &signs[4]}, c));
  EXPECT_STREQ(input_rejection_name(InputRejection::kEquivocation), "equivocation");
}

TEST(ElectionEncoder, ExchangeWithAllInputsEqualsReplicated) {
  Rng rng(4);
  const std::size_t n = 9, d = 257;
  const auto g = random_code(n, rng);
  const auto signs = random_signs(n, d, rng);
  std::vector<ExchangeInput> inputs;
  for (std::size_t j = 0; j < n; ++j) inputs.push_back({static_cast<std::uint32_t>(j), &signs[j]});
  for (std::size_t i = 0; i < n; ++i) {
    BitVector replicated;
    encode_replicated(g, i, signs, replicated);
    const auto exchanged = encode_exchange(g, i, d, inputs);
    EXPECT_EQ(exchanged.vote, replicated);
    EXPECT_EQ(exchanged.counted, g.row(i));
    EXPECT_TRUE(exchanged.missing.empty());
  }
}

TEST(ElectionEncoder, ExchangeWithNothingAbstainsToPlusOne) {
  const auto g = AllocationMatrix::identity(3);
  const auto vote = encode_exchange(g, 1, 10, {});
  EXPECT_EQ(vote.vote.count_ones(), 10u);
  EXPECT_TRUE(vote.counted.empty());
  EXPECT_EQ(vote.missing, std::vector<std::uint32_t>{1});
}

}  // namespace
}  // namespace ballot::coding
