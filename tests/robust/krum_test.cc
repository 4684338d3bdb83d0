#include "robust/krum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust/detail/common.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::brute_krum_scores;
using testing::for_each_isa;
using testing::gaussian_rows;

std::vector<std::size_t> all_indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

class KrumBruteForce : public ::testing::TestWithParam<std::size_t> {};

TEST_P(KrumBruteForce, ScoresAndSelectionMatch) {
  const std::size_t n = GetParam(), d = 300;
  for_each_isa([&] {
    for (std::size_t f = 0; 2 * f + 3 <= n; f += std::max<std::size_t>(1, n / 8)) {
      const auto rows = gaussian_rows(n, d, 31 * n + f);
      auto result = Krum(KrumOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(result.ok()) << result.error().to_string();
      const auto want = brute_krum_scores(rows, d, all_indices(n), f);
      ASSERT_EQ(result->report.scores.size(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(result->report.scores[i], want[i], 1e-4 * want[i]) << i;
      const std::size_t best = static_cast<std::size_t>(std::min_element(want.begin(), want.end()) - want.begin());
      ASSERT_EQ(result->report.selected, std::vector<std::size_t>{best});
      EXPECT_EQ(result->report.excluded.size(), n - 1);
      EXPECT_EQ(result->value, std::vector<float>(rows.begin() + best * d, rows.begin() + (best + 1) * d));
    }
  });
}

TEST_P(KrumBruteForce, MultiKrumAveragesTheBestScores) {
  const std::size_t n = GetParam(), d = 200;
  const std::size_t f = (n - 3) / 2;
  const auto rows = gaussian_rows(n, d, 77 + n);
  const auto scores = brute_krum_scores(rows, d, all_indices(n), f);
  auto order = all_indices(n);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return scores[a] < scores[b]; });
  for (std::size_t m : {std::size_t{1}, std::size_t{0}, n}) {
    const std::size_t take = m == 0 ? n - f : m;
    std::vector<std::size_t> best(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take));
    std::sort(best.begin(), best.end());
    auto result = MultiKrum(MultiKrumOptions{f, m, 1}).aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(result->report.selected, best);
    testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, best), 1e-5);
  }
}

// Up to 32 inputs the Gram product is the 4×4 kernel; above, the packed 5×5 kernel (AVX-512) or
// Eigen (other levels); 33 and 53 leave a partial group of 5.
INSTANTIATE_TEST_SUITE_P(Sizes, KrumBruteForce, ::testing::Values(3u, 5u, 7u, 10u, 25u, 33u, 40u, 53u));

// The Gram-matrix distances against double-precision brute force, with d spanning several
// 512-column chunks and 4096-column blocks and a tail that is not a whole vector.
TEST(PairwiseDistances, MatchBruteForceAcrossChunksAndBlocks) {
  for_each_isa([] {
    for (std::size_t n : {33u, 41u, 100u}) {
      for (std::size_t d : {100u, 1000u, 9000u + 7u}) {
        if (n != 33 && d > 1000) continue;  // keeps the Debug + ASan run short
        const auto rows = gaussian_rows(n, d, 500 + n + d);
        const auto dist = detail::pairwise_distances(InputMatrix(rows.data(), n, d), 1);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; j += (i % 7) + 1) {
            const double want = testing::squared_distance(&rows[i * d], &rows[j * d], d);
            ASSERT_NEAR(dist.at(i, j), want, 1e-5 * (want + static_cast<double>(d)))
                << n << " " << d << " " << i << " " << j;
          }
      }
    }
  });
}

TEST(PairwiseDistances, IdenticalAcrossThreadCountsAndRowLayouts) {
  const std::size_t n = 41, d = 3 * 4096 + 100;
  const auto rows = gaussian_rows(n, d, 4);
  const auto one = detail::pairwise_distances(InputMatrix(rows.data(), n, d), 1);
  const auto three = detail::pairwise_distances(InputMatrix(rows.data(), n, d), 3);
  EXPECT_EQ(one.gram, three.gram);
  // The same rows as a list of spans (no uniform stride): the same bits.
  std::vector<std::vector<float>> list;
  for (std::size_t i = 0; i < n; ++i) list.emplace_back(rows.begin() + i * d, rows.begin() + (i + 1) * d);
  auto view = InputMatrix::from_rows(list);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(detail::pairwise_distances(*view, 2).gram, one.gram);
}

TEST(PairwiseDistances, NonFiniteRowsAreUnusableInTheManyRowKernel) {
  const std::size_t n = 37, d = 700;
  auto rows = gaussian_rows(n, d, 6);
  rows[3 * d + 650] = std::numeric_limits<float>::quiet_NaN();
  rows[36 * d + 1] = -std::numeric_limits<float>::infinity();
  const auto dist = detail::pairwise_distances(InputMatrix(rows.data(), n, d), 1);
  EXPECT_EQ(dist.non_finite, (std::vector<std::size_t>{3, 36}));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(dist.usable[i], i != 3 && i != 36) << i;
    EXPECT_TRUE(std::isinf(dist.at(3, i)) && std::isinf(dist.at(i, 36))) << i;
  }
  EXPECT_TRUE(std::isfinite(dist.at(0, 1)));
}

TEST(Krum, PreconditionAtItsEdge) {
  for (std::size_t f : {0u, 1u, 2u, 5u}) {
    const auto below = Krum::check(2 * f + 2, f);
    ASSERT_FALSE(below.ok());
    EXPECT_EQ(below.error().code, ErrorCode::kPrecondition);
    EXPECT_NE(below.error().message.find("n >= 2f + 3"), std::string::npos);
    EXPECT_TRUE(Krum::check(2 * f + 3, f).ok());
    EXPECT_FALSE(MultiKrum::check(2 * f + 2, f, 0).ok());
    EXPECT_TRUE(MultiKrum::check(2 * f + 3, f, 0).ok());
  }
  EXPECT_FALSE(MultiKrum::check(5, 1, 6).ok());
  std::vector<float> rows(4 * 3, 0.0f);
  EXPECT_FALSE(Krum(KrumOptions{1, 1}).aggregate(InputMatrix(rows.data(), 4, 3)).ok());
}

// f attackers send huge values, or a colluding cluster of identical crafted vectors: Krum still
// selects an honest input.
TEST(Krum, SelectsAnHonestInputUnderAttack) {
  const std::size_t n = 11, f = 4, d = 64;
  for (int attack = 0; attack < 3; ++attack) {
    auto rows = gaussian_rows(n, d, 5 + attack);
    for (std::size_t i = n - f; i < n; ++i)
      for (std::size_t c = 0; c < d; ++c)
        rows[i * d + c] = attack == 0 ? 1e30f : attack == 1 ? -3e38f : 10.0f + 0.0f * c;  // 2: a tight cluster
    for_each_isa([&] {
      auto krum = Krum(KrumOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(krum.ok());
      EXPECT_LT(krum->report.selected[0], n - f) << "attack " << attack;
      auto multi = MultiKrum(MultiKrumOptions{f, 0, 1}).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(multi.ok());
      for (std::size_t i : multi->report.selected) EXPECT_LT(i, n - f) << "attack " << attack;
    });
  }
}

TEST(Krum, NonFiniteInputsGetInfiniteScoresAndAreNamed) {
  const std::size_t n = 9, f = 3, d = 100;
  auto rows = gaussian_rows(n, d, 8);
  rows[1 * d + 5] = std::numeric_limits<float>::quiet_NaN();
  rows[4 * d + 99] = std::numeric_limits<float>::infinity();
  for (std::size_t c = 0; c < d; ++c) rows[6 * d + c] = 1e25f;  // finite, but its norm overflows
  auto result = Krum(KrumOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{1, 4}));
  for (std::size_t i : {1u, 4u, 6u}) EXPECT_TRUE(std::isinf(result->report.scores[i])) << i;
  for (float v : result->value) EXPECT_TRUE(std::isfinite(v));
  const auto s = result->report.selected[0];
  EXPECT_TRUE(s != 1 && s != 4 && s != 6);
}

TEST(Krum, TooManyUnusableInputsIsAnError) {
  const std::size_t n = 5, d = 10;
  std::vector<float> rows(n * d, std::numeric_limits<float>::quiet_NaN());
  auto result = Krum(KrumOptions{1, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
  EXPECT_FALSE(MultiKrum(MultiKrumOptions{1, 0, 1}).aggregate(InputMatrix(rows.data(), n, d)).ok());
}

TEST(Krum, IdenticalAcrossThreadCountsAndPermutations) {
  const std::size_t n = 12, f = 3, d = 70000;  // several Gram units
  auto rows = gaussian_rows(n, d, 12);
  auto one = Krum(KrumOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
  auto two = Krum(KrumOptions{f, 2}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->report.scores, two->report.scores);
  EXPECT_EQ(one->value, two->value);
  // Reverse the inputs: the same vector wins.
  std::vector<float> reversed(n * d);
  for (std::size_t i = 0; i < n; ++i) std::copy_n(rows.begin() + i * d, d, reversed.begin() + (n - 1 - i) * d);
  auto rev = Krum(KrumOptions{f, 1}).aggregate(InputMatrix(reversed.data(), n, d));
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(rev->report.selected[0], n - 1 - one->report.selected[0]);
  EXPECT_EQ(rev->value, one->value);
}

TEST(Krum, Spec) {
  EXPECT_EQ(Krum(KrumOptions{2, 1}).spec(), "krum:f=2");
  EXPECT_EQ(MultiKrum(MultiKrumOptions{2, 5, 2}).spec(), "multi_krum:f=2,m=5,threads=2");
}

}  // namespace
}  // namespace ballot::robust
