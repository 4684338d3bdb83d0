#include "coding/code_search.h"

#include <gtest/gtest.h>

#include "coding/tolerance.h"

namespace ballot::coding {
namespace {

TEST(CodeSearch, ReproducesTheKnownOptima) {
  // ALGORITHMS.md §3: 19 ones for (5, 1) — the paper's code — and 29 for (7, 1) against the
  // general construction's 33.
  const struct { std::size_t n, b, ones, construction; } known[] = {{5, 1, 19, 19}, {7, 1, 29, 33}};
  for (const auto& k : known) {
    const auto result = find_minimum_redundancy_code(k.n, k.b).value();
    EXPECT_EQ(result.ones, k.ones) << k.n;
    EXPECT_EQ(result.construction_ones, k.construction);
    EXPECT_TRUE(result.proven_optimal);
    EXPECT_TRUE(certify(result.matrix, k.b, ThreatModel::kVotesOnly).value().tolerant);
  }
}

TEST(CodeSearch, EveryResultIsCertifiedAndNeverWorseThanTheConstruction) {
  for (std::size_t n = 1; n <= 7; ++n) {
    for (std::size_t b = 0; 2 * b + 1 <= n; ++b) {
      const auto result = find_minimum_redundancy_code(n, b).value();
      EXPECT_TRUE(result.proven_optimal);
      EXPECT_EQ(result.matrix.ones(), result.ones);
      EXPECT_TRUE(certify(result.matrix, b, ThreatModel::kVotesOnly).value().tolerant) << n << " " << b;
      if (n % 2 == 1) {
        EXPECT_LE(result.ones, result.construction_ones);
      }
      for (std::size_t i = 1; i < n; ++i)  // rows sorted by size
        EXPECT_LE(result.matrix.row_size(i - 1), result.matrix.row_size(i));
    }
  }
}

// Exhaustive over all 2^(n²) matrices for n ≤ 4: the search's minimum is the true minimum.
TEST(CodeSearch, MatchesExhaustiveEnumerationForTinyN) {
  for (std::size_t n = 1; n <= 4; ++n) {
    for (std::size_t b = 0; 2 * b + 1 <= n; ++b) {
      std::size_t best = n * n + 1;
      for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << (n * n)); ++bits) {
        const auto ones = static_cast<std::size_t>(std::popcount(bits));
        if (ones >= best) continue;
        AllocationMatrix g(n);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j) g.set(i, j, (bits >> (i * n + j)) & 1u);
        if (certify(g, b, ThreatModel::kVotesOnly).value().tolerant) best = ones;
      }
      EXPECT_EQ(find_minimum_redundancy_code(n, b).value().ones, best) << n << " " << b;
    }
  }
}

TEST(CodeSearch, NineNodesTwoByzantineBeatsTheConstruction) {
  const auto result = find_minimum_redundancy_code(9, 2).value();
  EXPECT_TRUE(result.proven_optimal);
  EXPECT_EQ(result.construction_ones, 61u);
  EXPECT_LT(result.ones, result.construction_ones);
  EXPECT_TRUE(certify(result.matrix, 2, ThreatModel::kVotesOnly).value().tolerant);
  const auto smaller = find_minimum_redundancy_code(9, 2, {.max_visits = 3}).value();
  EXPECT_FALSE(smaller.proven_optimal);
  EXPECT_TRUE(certify(smaller.matrix, 2, ThreatModel::kVotesOnly).value().tolerant);
}

TEST(CodeSearch, RejectsOutOfRangeArguments) {
  EXPECT_FALSE(find_minimum_redundancy_code(0, 0).ok());
  EXPECT_FALSE(find_minimum_redundancy_code(10, 1).ok());
  EXPECT_FALSE(find_minimum_redundancy_code(5, 3).ok());
  // 2b + 1 wraps to 1 in 64 bits: still refused, not searched as b = 0.
  EXPECT_FALSE(find_minimum_redundancy_code(5, std::size_t{1} << 63).ok());
}

}  // namespace
}  // namespace ballot::coding
