#include "attacks/targets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "attacks/election_attack.h"
#include "core/rng.h"

namespace ballot::attacks {
namespace {

using coding::AllocationMatrix;

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

TEST(ParseIndices, AscendingAndValidated) {
  EXPECT_EQ(*parse_indices("0,3,5", 6), (std::vector<std::size_t>{0, 3, 5}));
  EXPECT_EQ(*parse_indices(" 5, 0 ,3 ", 6), (std::vector<std::size_t>{0, 3, 5}));
  EXPECT_TRUE(parse_indices("", 6)->empty());
  EXPECT_TRUE(parse_indices("  ", 6)->empty());
  struct Bad {
    const char* list;
    const char* mentions;
  };
  for (const Bad& bad :
       {Bad{"0,0", "twice"}, Bad{"6", "out of range"}, Bad{"a", "'a'"}, Bad{"1,,2", "''"}, Bad{"-1", "'-1'"},
        Bad{"1.5", "'1.5'"}, Bad{"1,", "''"}, Bad{"99999999999999999999999", "not a node index"}}) {
    auto parsed = parse_indices(bad.list, 6);
    ASSERT_FALSE(parsed.ok()) << bad.list;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message.find(bad.mentions), std::string::npos) << parsed.error().message;
  }
}

// Reference scorer, independent of coding/: over all 2^n partition-sign patterns, the number on
// which `coalition`, voting −μ, makes the final vote differ from μ (local and final ties → +1).
std::size_t wrong_patterns(const AllocationMatrix& g, const std::vector<std::size_t>& coalition) {
  const std::size_t n = g.n();
  std::size_t wrong = 0;
  for (std::uint64_t p = 0; p < (std::uint64_t{1} << n); ++p) {
    int sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += ((p >> j) & 1u) ? 1 : -1;
    const int mu = sum >= 0 ? 1 : -1;
    int final_sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      int vote;
      if (std::find(coalition.begin(), coalition.end(), i) != coalition.end()) {
        vote = -mu;
      } else {
        int local = 0;
        for (std::size_t j = 0; j < n; ++j)
          if (g.get(i, j)) local += ((p >> j) & 1u) ? 1 : -1;
        vote = local >= 0 ? 1 : -1;
      }
      final_sum += vote;
    }
    wrong += (final_sum >= 0 ? 1 : -1) != mu;
  }
  return wrong;
}

std::vector<std::vector<std::size_t>> all_subsets(std::size_t n, std::size_t k) {
  std::vector<std::vector<std::size_t>> out;
  std::vector<bool> pick(n, false);
  std::fill(pick.begin(), pick.begin() + static_cast<std::ptrdiff_t>(k), true);
  do {
    std::vector<std::size_t> set;
    for (std::size_t i = 0; i < n; ++i)
      if (pick[i]) set.push_back(i);
    out.push_back(set);
  } while (std::prev_permutation(pick.begin(), pick.end()));
  return out;
}

struct WorstCase {
  const char* name;
  AllocationMatrix g;
  std::size_t count;
};

class WorstCoalition : public ::testing::TestWithParam<WorstCase> {};

TEST_P(WorstCoalition, IsTheMaximumOverEveryCoalitionAndDeterministic) {
  const auto& [name, g, count] = GetParam();
  const auto worst = worst_coalition(g, count);
  EXPECT_EQ(worst, worst_coalition(g, count));
  ASSERT_EQ(worst.size(), count);
  EXPECT_TRUE(std::is_sorted(worst.begin(), worst.end()));
  EXPECT_EQ(std::set<std::size_t>(worst.begin(), worst.end()).size(), count);
  const std::size_t score = wrong_patterns(g, worst);
  std::size_t best_other = 0;
  for (const auto& other : all_subsets(g.n(), count)) best_other = std::max(best_other, wrong_patterns(g, other));
  EXPECT_EQ(score, best_other) << name;
  // ... hence at least as bad as any random coalition.
  for (std::uint64_t seed = 0; seed < 20; ++seed)
    EXPECT_GE(score, wrong_patterns(g, *choose_byzantine(g.n(), count, seed)));
}

INSTANTIATE_TEST_SUITE_P(Codes, WorstCoalition,
                         ::testing::Values(WorstCase{"paper5_b2", AllocationMatrix::paper_n5(), 2},
                                           WorstCase{"paper5_b1", AllocationMatrix::paper_n5(), 1},
                                           WorstCase{"identity7_b3", AllocationMatrix::identity(7), 3},
                                           WorstCase{"bernoulli9_b3", *AllocationMatrix::bernoulli(9, 2, 7), 3},
                                           WorstCase{"deterministic9_b3", *AllocationMatrix::deterministic(9, 2), 3}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(WorstCoalition, HarmlessCoalitionsGiveTheFirstIndices) {
  // Every single node is harmless to the paper's code, and G = I is symmetric.
  EXPECT_EQ(worst_coalition(AllocationMatrix::paper_n5(), 1), (std::vector<std::size_t>{0}));
  EXPECT_EQ(worst_coalition(AllocationMatrix::identity(9), 4), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(worst_coalition(AllocationMatrix::identity(9), 0).empty());
  EXPECT_EQ(worst_coalition(AllocationMatrix::identity(3), 5), (std::vector<std::size_t>{0, 1, 2}));
}

TEST(WorstCoalition, BreaksTheCodeWhereTheCertificateSaysItCan) {
  // The paper's code does not tolerate two: the worst pair defeats it on some pattern.
  const auto g = AllocationMatrix::paper_n5();
  EXPECT_GT(wrong_patterns(g, worst_coalition(g, 2)), 0u);
}

// Under a realistic model (each partition sign correct with probability q = 0.8), the worst
// coalition for n = 15, Bernoulli r = 2, b = 6 makes at least as many final-vote errors as the
// average random coalition (it is chosen for uniform patterns, so this checks it transfers).
TEST(WorstCoalition, AtLeastAsHarmfulAsRandomCoalitionsOnNoisySigns) {
  const auto g = *AllocationMatrix::bernoulli(15, 2, 3);
  const std::size_t n = 15, d = 4096, count = 6;
  Rng rng(11);
  BitVector truth(d);
  for (std::size_t c = 0; c < d; ++c) truth.set(c, rng.bernoulli(0.5));
  std::vector<BitVector> signs(n, truth);
  for (auto& s : signs)
    for (std::size_t c = 0; c < d; ++c)
      if (rng.bernoulli(0.2)) s.set(c, !s.get(c));
  const auto worst = worst_coalition(g, count);
  const std::size_t worst_errors = run_omniscient_election(g, signs, worst).errors;
  double random_errors = 0;
  constexpr int kTrials = 30;
  for (int seed = 0; seed < kTrials; ++seed)
    random_errors += static_cast<double>(run_omniscient_election(g, signs, *choose_byzantine(n, count, seed)).errors);
  random_errors /= kTrials;
  EXPECT_GE(static_cast<double>(worst_errors), random_errors);
  EXPECT_GT(worst_errors, 0u);
}

TEST(WorstCoalition, LargeNRanksReliableVoters) {
  // n = 71 > 64: the heuristic. deterministic(71, 10) gives its last 21 nodes full rows, which
  // always vote μ; the most reliable voters are those.
  const auto g = *AllocationMatrix::deterministic(71, 10);
  const auto worst = worst_coalition(g, 5);
  ASSERT_EQ(worst.size(), 5u);
  EXPECT_EQ(worst, worst_coalition(g, 5));
  for (const std::size_t i : worst) EXPECT_EQ(g.row_size(i), 71u) << i;
}

TEST(SelectByzantine, Selectors) {
  const auto g = AllocationMatrix::paper_n5();
  EXPECT_EQ(*select_byzantine("random", 15, 4, 9, nullptr), *choose_byzantine(15, 4, 9));
  EXPECT_EQ(*select_byzantine("worst", 5, 2, 9, &g), worst_coalition(g, 2));
  EXPECT_EQ(*select_byzantine(" worst ", 7, 3, 9, nullptr), worst_coalition(AllocationMatrix::identity(7), 3));
  EXPECT_EQ(*select_byzantine("worst", 100000, 3, 9, nullptr), (std::vector<std::size_t>{0, 1, 2}));  // any n
  EXPECT_EQ(*select_byzantine("4,1", 5, 0, 9, nullptr), (std::vector<std::size_t>{1, 4}));
  EXPECT_EQ(*select_byzantine("4,1", 5, 2, 9, nullptr), (std::vector<std::size_t>{1, 4}));
  EXPECT_FALSE(select_byzantine("4,1", 5, 3, 9, nullptr).ok());  // count disagrees
  EXPECT_FALSE(select_byzantine("worst", 7, 2, 9, &g).ok());     // G is for n = 5
  EXPECT_FALSE(select_byzantine("worst", 5, 6, 9, &g).ok());     // too many
  EXPECT_FALSE(select_byzantine("random", 5, 6, 9, nullptr).ok());
  EXPECT_FALSE(select_byzantine("everyone", 5, 1, 9, nullptr).ok());
}

}  // namespace
}  // namespace ballot::attacks
