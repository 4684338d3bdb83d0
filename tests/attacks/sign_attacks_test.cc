#include "attacks/sign_attacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace ballot::attacks {
namespace {

BitVector sample(std::size_t d) {
  BitVector bits(d);
  for (std::size_t i = 0; i < d; i += 3) bits.set(i, true);
  return bits;
}

TEST(SignAttack, ParseAndSpec) {
  EXPECT_EQ(SignAttack::parse("reverse")->kind, SignAttackKind::kReverse);
  EXPECT_EQ(SignAttack::parse("random")->kind, SignAttackKind::kRandom);
  EXPECT_EQ(SignAttack::parse("none")->kind, SignAttackKind::kNone);
  auto down = SignAttack::parse("directional:sign=-1");
  ASSERT_TRUE(down.ok());
  EXPECT_FALSE(down->direction);
  EXPECT_EQ(down->spec(), "directional:sign=-1");
  EXPECT_FALSE(SignAttack::parse("flip").ok());
  EXPECT_FALSE(SignAttack::parse("reverse:x=1").ok());
  EXPECT_FALSE(SignAttack::parse("directional:sign=0").ok());
}

TEST(SignAttack, ReverseNegatesEveryCoordinate) {
  BitVector vote = sample(130);
  const BitVector honest = vote;
  corrupt_vote(*SignAttack::parse("reverse"), 1, 0, 0, vote);
  for (std::size_t i = 0; i < 130; ++i) EXPECT_NE(vote.get(i), honest.get(i));
  EXPECT_TRUE(vote.padding_is_clear());
}

TEST(SignAttack, DirectionalAndRandom) {
  BitVector vote = sample(100);
  corrupt_vote(*SignAttack::parse("directional:sign=+1"), 1, 0, 0, vote);
  EXPECT_EQ(vote.count_ones(), 100u);
  corrupt_vote(*SignAttack::parse("directional:sign=-1"), 1, 0, 0, vote);
  EXPECT_EQ(vote.count_ones(), 0u);

  BitVector a(10000), b(10000), c(10000);
  corrupt_vote(*SignAttack::parse("random"), 7, 3, 2, a);
  corrupt_vote(*SignAttack::parse("random"), 7, 3, 2, b);
  corrupt_vote(*SignAttack::parse("random"), 7, 4, 2, c);
  EXPECT_EQ(a, b);  // reproducible in every process
  EXPECT_FALSE(a == c);
  EXPECT_NEAR(static_cast<double>(a.count_ones()), 5000.0, 300.0);
  EXPECT_TRUE(a.padding_is_clear());
}

TEST(ChooseByzantine, DistinctSortedReproducibleAndUniform) {
  auto chosen = choose_byzantine(15, 6, 42);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->size(), 6u);
  EXPECT_TRUE(std::is_sorted(chosen->begin(), chosen->end()));
  EXPECT_EQ(std::set<std::size_t>(chosen->begin(), chosen->end()).size(), 6u);
  EXPECT_EQ(*chosen, *choose_byzantine(15, 6, 42));
  std::vector<int> counts(15, 0);
  for (std::uint64_t seed = 0; seed < 3000; ++seed) {
    const auto set = choose_byzantine(15, 3, seed);  // a named Result: its value outlives the loop
    for (auto i : *set) ++counts[i];
  }
  for (int c : counts) EXPECT_NEAR(c, 600, 120);  // 3000 * 3 / 15, about 5 sd
  EXPECT_FALSE(choose_byzantine(3, 4, 1).ok());
  EXPECT_TRUE(choose_byzantine(3, 0, 1)->empty());
}

}  // namespace
}  // namespace ballot::attacks
