#include "attacks/sign_attacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/enforce.h"

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

TEST(SignAttack, BehaviourConversionAndOverloadAgree) {
  for (const char* text : {"none", "reverse", "random", "directional:sign=+1", "directional:sign=-1"}) {
    const SignAttack attack = *SignAttack::parse(text);
    const Behaviour behaviour = attack.behaviour();
    EXPECT_EQ(behaviour.spec(), text);  // the two spellings agree
    EXPECT_EQ(*Behaviour::parse(text), behaviour);
    auto back = SignAttack::from_behaviour(behaviour);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->spec(), attack.spec());
    BitVector a = sample(300), b = sample(300);
    corrupt_vote(attack, 5, 2, 1, a);
    corrupt_vote(behaviour, 5, 2, 1, b);
    EXPECT_EQ(a, b) << text;
  }
  EXPECT_FALSE(SignAttack::from_behaviour(*Behaviour::parse("alie")).ok());
  BitVector vote = sample(10);
  EXPECT_THROW(corrupt_vote(*Behaviour::parse("omniscient"), 1, 0, 0, vote), EnforceError);
}

}  // namespace
}  // namespace ballot::attacks
