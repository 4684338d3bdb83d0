#include "attacks/election_attack.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "attacks/election_adversary.h"
#include "attacks/sign_attacks.h"
#include "attacks/targets.h"
#include "coding/election_encoder.h"
#include "coding/tolerance.h"
#include "core/enforce.h"
#include "core/rng.h"
#include "kernels/majority_vote.h"

namespace ballot::attacks {
namespace {

using coding::AllocationMatrix;

// Partition signs of one round: a random true sign per coordinate, each partition's sign correct
// with probability q (q = 0.5: uniform patterns, where margins are smallest).
std::vector<BitVector> partition_signs(std::size_t n, std::size_t d, double q, Rng& rng) {
  BitVector truth(d);
  for (std::size_t c = 0; c < d; ++c) truth.set(c, rng.bernoulli(0.5));
  std::vector<BitVector> signs(n, truth);
  for (auto& s : signs)
    for (std::size_t c = 0; c < d; ++c)
      if (!rng.bernoulli(q)) s.set(c, !s.get(c));
  return signs;
}

std::vector<std::vector<std::size_t>> subsets_up_to(std::size_t n, std::size_t b) {
  std::vector<std::vector<std::size_t>> out;
  for (std::uint64_t mask = 1; mask < (std::uint64_t{1} << n); ++mask) {
    if (static_cast<std::size_t>(std::popcount(mask)) > b) continue;
    std::vector<std::size_t> set;
    for (std::size_t i = 0; i < n; ++i)
      if ((mask >> i) & 1u) set.push_back(i);
    out.push_back(set);
  }
  return out;
}

// The final vote when `coalition` sends `messages` and everybody else votes honestly.
BitVector final_vote(const AllocationMatrix& g, const std::vector<BitVector>& signs,
                     const std::vector<std::size_t>& coalition, const std::vector<BitVector>& messages) {
  std::vector<BitVector> votes;
  BitVector honest;
  coding::elect_replicated(g, signs, votes, honest);
  for (std::size_t k = 0; k < coalition.size(); ++k) votes[coalition[k]] = messages[k];
  BitVector out;
  coding::decode(votes, out);
  return out;
}

struct CertifiedCode {
  const char* name;
  AllocationMatrix g;
  std::size_t b;
};

class WithinTolerance : public ::testing::TestWithParam<CertifiedCode> {};

// Acceptance: with a certified deterministic code and b within its tolerance, the final vote
// equals the attack-free vote in 100% of rounds under every sign-domain attack, the omniscient
// one included, for every coalition of at most b nodes.
TEST_P(WithinTolerance, FinalVoteEqualsTheAttackFreeVoteUnderEverySignAttack) {
  const auto& [name, g, b] = GetParam();
  const std::size_t n = g.n(), d = 192;
  auto certificate = coding::certify(g, b, coding::ThreatModel::kVotesOnly);
  ASSERT_TRUE(certificate.ok());
  ASSERT_TRUE(certificate->tolerant) << name;
  const auto coalitions = subsets_up_to(n, b);
  const std::vector<SignAttack> blind = {*SignAttack::parse("reverse"), *SignAttack::parse("random"),
                                         *SignAttack::parse("directional:sign=+1"),
                                         *SignAttack::parse("directional:sign=-1")};
  Rng rng(100 + n);
  std::size_t rounds = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const double q = trial % 3 == 0 ? 0.5 : (trial % 3 == 1 ? 0.7 : 0.9);
    const auto signs = partition_signs(n, d, q, rng);
    std::vector<BitVector> votes;
    BitVector attack_free;
    coding::elect_replicated(g, signs, votes, attack_free);
    for (const auto& coalition : coalitions) {
      const ElectionOutcome outcome = run_omniscient_election(g, signs, coalition);
      ASSERT_EQ(outcome.attacked_vote, attack_free) << name << " trial " << trial;
      ASSERT_EQ(outcome.flipped, 0u);
      ASSERT_EQ(outcome.errors, 0u);
      ASSERT_EQ(final_vote(g, signs, coalition, omniscient_votes(g, signs, coalition)), attack_free);
      for (const SignAttack& attack : blind) {
        std::vector<BitVector> messages;
        for (const std::size_t i : coalition) {
          messages.push_back(votes[i]);
          corrupt_vote(attack, 7, static_cast<std::uint64_t>(trial), i, messages.back());
        }
        ASSERT_EQ(final_vote(g, signs, coalition, messages), attack_free) << attack.spec();
      }
      ++rounds;
    }
  }
  EXPECT_EQ(rounds, 6 * coalitions.size());
}

INSTANTIATE_TEST_SUITE_P(
    Codes, WithinTolerance,
    ::testing::Values(CertifiedCode{"paper5_b1", AllocationMatrix::paper_n5(), 1},
                      CertifiedCode{"deterministic7_b1", *AllocationMatrix::deterministic(7, 1), 1},
                      CertifiedCode{"deterministic9_b2", *AllocationMatrix::deterministic(9, 2), 2},
                      CertifiedCode{"deterministic11_b3", *AllocationMatrix::deterministic(11, 3), 3}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(OmniscientVotes, BreaksMajorityVoteWithoutCoding) {
  // G = I (signSGD-MV), n = 7, coalition of 3: every coordinate whose partition majority is 4–3
  // or 5–2 with enough μ-voters inside the coalition flips.
  const std::size_t n = 7, d = 4096;
  const auto g = AllocationMatrix::identity(n);
  Rng rng(3);
  const auto signs = partition_signs(n, d, 0.5, rng);
  const std::vector<std::size_t> coalition = {1, 4, 6};
  const ElectionOutcome outcome = run_omniscient_election(g, signs, coalition);
  // Reference count: coordinate c flips iff the μ votes outside the coalition are below 4.
  std::size_t expected = 0;
  for (std::size_t c = 0; c < d; ++c) {
    const bool mu = outcome.target.get(c);
    int outside = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (std::find(coalition.begin(), coalition.end(), j) == coalition.end()) outside += signs[j].get(c) == mu;
    expected += outside < 4;
  }
  EXPECT_GT(expected, d / 4);
  EXPECT_EQ(outcome.errors, expected);
  EXPECT_EQ(outcome.flipped, expected);  // G = I: the attack-free vote is μ
  EXPECT_EQ(outcome.honest_vote, outcome.target);
}

TEST(OmniscientVotes, MatchesPlanOmniscientAttackForItsCoalition) {
  struct Case {
    AllocationMatrix g;
    std::size_t b;
  };
  Rng rng(9);
  for (const Case& c :
       {Case{AllocationMatrix::identity(9), 4}, Case{AllocationMatrix::paper_n5(), 2},
        Case{*AllocationMatrix::bernoulli(15, 2, 4), 6}, Case{*AllocationMatrix::bernoulli(9, 3, 1), 3}}) {
    const auto signs = partition_signs(c.g.n(), 1000, 0.7, rng);
    const OmniscientAttack plan = plan_omniscient_attack(c.g, signs, c.b);
    const std::vector<std::size_t> coalition(plan.byzantine.begin(), plan.byzantine.end());
    const ElectionOutcome outcome = run_omniscient_election(c.g, signs, coalition);
    EXPECT_EQ(outcome.errors, plan.errors);
    EXPECT_EQ(outcome.flipped, plan.flipped);
    EXPECT_EQ(outcome.attacked_vote, plan.attacked_vote);
    EXPECT_EQ(outcome.target, plan.target);
    EXPECT_EQ(outcome.honest_vote, plan.honest_vote);
  }
}

TEST(OmniscientVotes, IsOptimalCoordinateByCoordinate) {
  // n = 5 paper code, coalition {0, 1}: enumerate all 4 message combinations per coordinate.
  const auto g = AllocationMatrix::paper_n5();
  const std::size_t n = 5, d = 32;  // every pattern of 5 partitions once
  std::vector<BitVector> signs(n, BitVector(d));
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t j = 0; j < n; ++j) signs[j].set(p, (p >> j) & 1u);
  std::size_t total_errors = 0;
  for (const auto& coalition : {std::vector<std::size_t>{0, 1}, std::vector<std::size_t>{2, 3},
                                std::vector<std::size_t>{0, 4}, std::vector<std::size_t>{1, 2}}) {
    const ElectionOutcome outcome = run_omniscient_election(g, signs, coalition);
    std::vector<BitVector> votes;
    BitVector honest;
    coding::elect_replicated(g, signs, votes, honest);
    for (std::size_t c = 0; c < d; ++c) {
      bool can_break = false;
      for (int combo = 0; combo < 4; ++combo) {
        int ones = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const auto it = std::find(coalition.begin(), coalition.end(), i);
          ones += it == coalition.end() ? votes[i].get(c) : ((combo >> (it - coalition.begin())) & 1);
        }
        const bool final_bit = 2 * ones >= static_cast<int>(n);  // ties → +1
        can_break |= final_bit != outcome.target.get(c);
      }
      EXPECT_EQ(outcome.attacked_vote.get(c) != outcome.target.get(c), can_break) << "coordinate " << c;
    }
    total_errors += outcome.errors;
  }
  EXPECT_GT(total_errors, 0u);  // some pairs break the paper's code (two full rows cannot)
}

TEST(OmniscientVotes, LiesOnlyWhereItChangesTheOutcome) {
  const auto g = *AllocationMatrix::bernoulli(9, 2, 5);
  Rng rng(12);
  const auto signs = partition_signs(9, 3000, 0.6, rng);
  const std::vector<std::size_t> coalition = {2, 5, 7};
  const auto messages = omniscient_votes(g, signs, coalition);
  const ElectionOutcome outcome = run_omniscient_election(g, signs, coalition);
  ASSERT_EQ(messages.size(), coalition.size());
  BitVector own;
  for (std::size_t k = 0; k < coalition.size(); ++k) {
    coding::encode_replicated(g, coalition[k], signs, own);
    EXPECT_TRUE(messages[k].padding_is_clear());
    for (std::size_t c = 0; c < 3000; ++c) {
      if (outcome.attacked_vote.get(c) != outcome.target.get(c)) {
        EXPECT_NE(messages[k].get(c), outcome.target.get(c));  // −μ where it wins
      } else {
        EXPECT_EQ(messages[k].get(c), own.get(c));  // honest where it cannot
      }
    }
  }
  // Same final vote as the all −μ attacker.
  std::vector<BitVector> against(coalition.size(), outcome.target);
  for (auto& a : against) a.flip();
  EXPECT_EQ(final_vote(g, signs, coalition, against), outcome.attacked_vote);
  EXPECT_EQ(final_vote(g, signs, coalition, messages), outcome.attacked_vote);
}

TEST(OmniscientVotes, WorstCoalitionBreaksTheCodeBeyondItsTolerance) {
  // deterministic(7, 1) tolerates 1 but not 2 (certificate); the worst pair finds patterns
  // where the final vote flips.
  const auto g = *AllocationMatrix::deterministic(7, 1);
  auto cert = coding::certify(g, 2, coding::ThreatModel::kVotesOnly);
  ASSERT_TRUE(cert.ok());
  ASSERT_FALSE(cert->tolerant);
  const auto worst = worst_coalition(g, 2);
  Rng rng(4);
  const auto signs = partition_signs(7, 4096, 0.5, rng);
  EXPECT_GT(run_omniscient_election(g, signs, worst).errors, 0u);
}

TEST(OmniscientVotes, Preconditions) {
  const auto g = AllocationMatrix::identity(5);
  Rng rng(1);
  const auto signs = partition_signs(5, 10, 0.5, rng);
  const std::vector<std::size_t> twice = {1, 1}, outside = {5};
  EXPECT_THROW(omniscient_votes(g, signs, twice), EnforceError);
  EXPECT_THROW(omniscient_votes(g, signs, outside), EnforceError);
  EXPECT_THROW(omniscient_votes(g, std::span<const BitVector>(signs).first(4), std::vector<std::size_t>{}),
               EnforceError);
  EXPECT_TRUE(omniscient_votes(g, signs, std::vector<std::size_t>{}).empty());
}

}  // namespace
}  // namespace ballot::attacks
