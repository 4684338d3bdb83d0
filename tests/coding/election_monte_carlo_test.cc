#include "coding/election_monte_carlo.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

namespace ballot::coding {
namespace {

// Sign of a sum under a tie rule: kPlusOne → ±1, kAbstain → 0 at a tie.
int tie_sign(int sum, TieRule ties) {
  if (sum > 0) return 1;
  if (sum < 0) return -1;
  return ties == TieRule::kPlusOne ? 1 : 0;
}

// The exact error probability of a fixed code by enumeration: both true signs, all 2^n partition
// patterns weighted by q, all b-subsets, and (random attack) all Byzantine vote choices.
double exact_error(const AllocationMatrix& g, const MonteCarloOptions& o) {
  const std::size_t n = g.n();
  double total = 0, subsets = 0;
  for (std::uint64_t set = 0; set < (std::uint64_t{1} << n); ++set)
    subsets += static_cast<std::size_t>(std::popcount(set)) == o.b;
  for (const int truth : {1, -1}) {
    for (std::uint64_t right = 0; right < (std::uint64_t{1} << n); ++right) {
      const int k = std::popcount(right);
      const double p_u = std::pow(o.q, k) * std::pow(1 - o.q, static_cast<int>(n) - k);
      std::vector<int> local(n);
      for (std::size_t i = 0; i < n; ++i) {
        int sum = 0;
        for (std::size_t j = 0; j < n; ++j)
          if (g.get(i, j)) sum += ((right >> j) & 1u) ? truth : -truth;
        local[i] = tie_sign(sum, o.ties);
      }
      for (std::uint64_t set = 0; set < (std::uint64_t{1} << n); ++set) {
        if (static_cast<std::size_t>(std::popcount(set)) != o.b) continue;
        const std::uint64_t choices = o.attack == ElectionAttack::kRandom ? (std::uint64_t{1} << o.b) : 1;
        double errors = 0;
        for (std::uint64_t choice = 0; choice < choices; ++choice) {
          int sum = 0;
          std::size_t byz = 0;
          for (std::size_t i = 0; i < n; ++i) {
            int v = local[i];
            if ((set >> i) & 1u) {
              switch (o.attack) {
                case ElectionAttack::kReverse:
                  v = -v;
                  break;
                case ElectionAttack::kDirectional:
                  v = 1;
                  break;
                case ElectionAttack::kRandom:
                  v = ((choice >> byz) & 1u) ? 1 : -1;
                  break;
                case ElectionAttack::kOpposite:
                  v = -truth;
                  break;
              }
              ++byz;
            }
            sum += v;
          }
          errors += tie_sign(sum, o.ties) != truth;
        }
        total += 0.5 * p_u * errors / static_cast<double>(choices) / subsets;
      }
    }
  }
  return total;
}

TEST(ElectionMonteCarlo, MatchesExactEnumerationOnSmallCodes) {
  const AllocationMatrix codes[] = {
      AllocationMatrix::identity(7), AllocationMatrix::deterministic(7, 1).value(),
      AllocationMatrix::from_rows(6, {{0, 1}, {1, 2, 3}, {2, 3}, {4}, {0, 5}, {1, 2, 3, 4, 5}}).value()};
  for (const auto& g : codes) {
    for (const auto ties : {TieRule::kPlusOne, TieRule::kAbstain}) {
      for (const auto attack : {ElectionAttack::kReverse, ElectionAttack::kDirectional, ElectionAttack::kRandom,
                                ElectionAttack::kOpposite}) {
        MonteCarloOptions o;
        o.b = 2;
        o.q = 0.75;
        o.ties = ties;
        o.attack = attack;
        o.trials = 40000;
        const auto est = estimate_error(g, o).value();
        const double exact = exact_error(g, o);
        const double tolerance = 4.5 * std::sqrt(exact * (1 - exact) / 40000.0) + 1e-9;
        EXPECT_NEAR(est.error, exact, tolerance)
            << g.to_text() << tie_rule_name(ties) << " " << election_attack_name(attack);
      }
    }
  }
}

// ALGORITHMS.md §3 sanity numbers: n = 15, b = 6, q = 0.9, reverse attack, random Byzantine set,
// Bernoulli code with row redraw, reference arithmetic: ≈ 0.14 (majority vote), 0.11 (r = 2),
// 0.07 (r = 3), each within ±0.01. 2^16 trials each (standard error ≈ 0.0014, so ±0.01 is
// about 7 standard errors around values that land within 0.001 of the targets).
TEST(ElectionMonteCarlo, SanityNumbersOfThePaper) {
  MonteCarloOptions o;
  o.b = 6;
  o.q = 0.9;
  o.attack = ElectionAttack::kReverse;
  o.ties = TieRule::kAbstain;
  o.trials = std::uint64_t{1} << 16;
  o.seed = 2020;
  const auto mv = estimate_error(AllocationMatrix::identity(15), o).value();
  const auto r2 = estimate_error_bernoulli(15, 2.0, o).value();
  const auto r3 = estimate_error_bernoulli(15, 3.0, o).value();
  EXPECT_NEAR(mv.error, 0.14, 0.01);
  EXPECT_NEAR(r2.error, 0.11, 0.01);
  EXPECT_NEAR(r3.error, 0.07, 0.01);
  EXPECT_GT(r2.mean_redundancy, 2.1);  // the row redraw overshoots the nominal r
  EXPECT_LT(r2.standard_error, 0.002);
  // Majority vote: exact value P(Bin(9, .9) + Bin(6, .1) <= 7).
  double exact = 0;
  for (int x = 0; x <= 9; ++x)
    for (int y = 0; y <= 6; ++y)
      if (x + y <= 7)
        exact += std::tgamma(10) / (std::tgamma(x + 1) * std::tgamma(10 - x)) * std::pow(0.9, x) *
                 std::pow(0.1, 9 - x) * std::tgamma(7) / (std::tgamma(y + 1) * std::tgamma(7 - y)) * std::pow(0.1, y) *
                 std::pow(0.9, 6 - y);
  EXPECT_NEAR(mv.error, exact, 5 * mv.standard_error);
}

TEST(ElectionMonteCarlo, DeterministicForASeedAndPartialBlocks) {
  MonteCarloOptions o;
  o.b = 3;
  o.trials = 1000;  // not a multiple of 64
  const auto g = AllocationMatrix::deterministic(9, 2).value();
  const auto a = estimate_error(g, o).value();
  const auto b = estimate_error(g, o).value();
  EXPECT_EQ(a.errors, b.errors);
  EXPECT_EQ(a.trials, 1000u);
  o.seed = 99;
  o.q = 1.0;
  o.attack = ElectionAttack::kOpposite;
  // q = 1 and a tolerant code: 3 > 2 Byzantine nodes, but all partitions are right so every
  // honest vote is right: 6 of 9 votes win.
  EXPECT_EQ(estimate_error(g, o).value().errors, 0u);
}

TEST(ElectionMonteCarlo, RejectsBadOptions) {
  MonteCarloOptions o;
  o.b = 6;
  EXPECT_FALSE(estimate_error(AllocationMatrix::identity(5), o).ok());
  o.b = 1;
  o.q = 1.5;
  EXPECT_FALSE(estimate_error(AllocationMatrix::identity(5), o).ok());
  o.q = 0.9;
  o.trials = 0;
  EXPECT_FALSE(estimate_error(AllocationMatrix::identity(5), o).ok());
  // Past 2^48 (and where trials + 63 would wrap to no block at all): an error, not an empty result.
  for (const std::uint64_t trials : {kMaxTrials + 1, ~std::uint64_t{0}}) {
    o.trials = trials;
    EXPECT_EQ(estimate_error(AllocationMatrix::identity(5), o).error().code, ErrorCode::kInvalidArgument);
  }
  o.trials = 64;
  EXPECT_FALSE(estimate_error_bernoulli(5, 0.0, o).ok());
  EXPECT_EQ(parse_election_attack("directional").value(), ElectionAttack::kDirectional);
  EXPECT_FALSE(parse_election_attack("sideways").ok());
}

}  // namespace
}  // namespace ballot::coding
