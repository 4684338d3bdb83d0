#include "attacks/election_adversary.h"

#include <gtest/gtest.h>

#include <bit>

#include "coding/election_encoder.h"
#include "core/rng.h"

namespace ballot::attacks {
namespace {

using coding::AllocationMatrix;
using coding::decode;
using coding::elect_replicated;
using coding::ThreatModel;

std::vector<BitVector> random_signs(std::size_t n, std::size_t d, Rng& rng, double p = 0.5) {
  std::vector<BitVector> signs(n, BitVector(d));
  for (auto& s : signs)
    for (std::size_t c = 0; c < d; ++c) s.set(c, rng.bernoulli(p));
  return signs;
}

// Errors (final vote ≠ μ) of the coalition `set` voting −μ, through the real encoder/decoder.
std::size_t errors_with(const AllocationMatrix& g, const std::vector<BitVector>& signs, std::uint64_t set) {
  std::vector<BitVector> votes;
  BitVector honest, mu, out;
  elect_replicated(g, signs, votes, honest);
  decode(signs, mu);
  BitVector against = mu;
  against.flip();
  for (std::size_t i = 0; i < g.n(); ++i)
    if ((set >> i) & 1u) votes[i] = against;
  decode(votes, out);
  std::size_t errors = 0;
  for (std::size_t c = 0; c < mu.size(); ++c) errors += out.get(c) != mu.get(c);
  return errors;
}

TEST(ElectionAdversary, ExhaustiveCoalitionIsOptimal) {
  Rng rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const std::size_t n = 7 + static_cast<std::size_t>(trial % 2);
    const auto g = AllocationMatrix::bernoulli(n, 2.5, static_cast<std::uint64_t>(trial)).value();
    const auto signs = random_signs(n, 500, rng, 0.6);
    for (std::size_t b = 1; b <= 3; ++b) {
      const auto attack = plan_omniscient_attack(g, signs, b);
      ASSERT_TRUE(attack.exhaustive);
      ASSERT_EQ(attack.byzantine.size(), b);
      std::uint64_t mask = 0;
      for (const auto i : attack.byzantine) mask |= std::uint64_t{1} << i;
      EXPECT_EQ(attack.errors, errors_with(g, signs, mask));
      std::size_t best = 0;
      for (std::uint64_t set = 0; set < (std::uint64_t{1} << n); ++set)
        if (static_cast<std::size_t>(std::popcount(set)) == b) best = std::max(best, errors_with(g, signs, set));
      EXPECT_EQ(attack.errors, best) << "n = " << n << ", b = " << b;
      for (const auto& m : attack.messages) {
        BitVector expected = attack.target;
        expected.flip();
        EXPECT_EQ(m, expected);
      }
    }
  }
}

TEST(ElectionAdversary, GreedyCoalitionIsConsistentAndNoWorseThanRandom) {
  Rng rng(6);
  const auto g = AllocationMatrix::bernoulli(31, 3.0, 1).value();
  const auto signs = random_signs(31, 2000, rng, 0.55);
  const auto attack = plan_omniscient_attack(g, signs, 10);
  EXPECT_FALSE(attack.exhaustive);
  std::uint64_t mask = 0;
  for (const auto i : attack.byzantine) mask |= std::uint64_t{1} << i;
  EXPECT_EQ(std::popcount(mask), 10);
  EXPECT_EQ(attack.errors, errors_with(g, signs, mask));
  for (int k = 0; k < 20; ++k) {  // better than random coalitions
    std::uint64_t random_set = 0;
    while (std::popcount(random_set) < 10) random_set |= std::uint64_t{1} << rng.uniform_int(31);
    EXPECT_GE(attack.errors, errors_with(g, signs, random_set));
  }
}

TEST(ElectionAdversary, TolerantCodeLosesNoCoordinate) {
  Rng rng(7);
  const auto g = AllocationMatrix::paper_n5();
  const auto signs = random_signs(5, 4096, rng);  // every pattern many times
  EXPECT_EQ(plan_omniscient_attack(g, signs, 1).errors, 0u);
  const auto two = plan_omniscient_attack(g, signs, 2);
  EXPECT_GT(two.errors, 0u);
  EXPECT_GT(two.flipped, 0u);
  const auto identity = plan_omniscient_attack(AllocationMatrix::identity(5), signs, 1);
  EXPECT_GT(identity.errors, 0u);
}

TEST(ElectionAdversary, SmallestBreakingCoalition) {
  const auto paper = smallest_breaking_coalition(AllocationMatrix::paper_n5(), ThreatModel::kVotesOnly).value();
  EXPECT_EQ(paper.byzantine.size(), 2u);
  const auto identity = smallest_breaking_coalition(AllocationMatrix::identity(9), ThreatModel::kVotesOnly).value();
  EXPECT_EQ(identity.byzantine.size(), 1u);
  const auto construction = AllocationMatrix::deterministic(11, 3).value();
  EXPECT_EQ(smallest_breaking_coalition(construction, ThreatModel::kVotesOnly).value().byzantine.size(), 4u);
  EXPECT_EQ(smallest_breaking_coalition(AllocationMatrix::identity(9), ThreatModel::kVotesAndSources).error().code,
            ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ballot::attacks
