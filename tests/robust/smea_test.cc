#include "robust/smea.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Every subset of size n − f, by bitmask, with the d×d covariance diagonalised explicitly.
std::vector<std::size_t> brute_smea(const std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t f,
                                    double* value) {
  double best = INFINITY;
  std::vector<std::size_t> best_set;
  // Ties go to the lexicographically first subset, as in the rule.
  std::vector<std::vector<std::size_t>> sets;
  for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (static_cast<std::size_t>(__builtin_popcount(mask)) != n - f) continue;
    std::vector<std::size_t> set;
    for (std::size_t i = 0; i < n; ++i)
      if (mask >> i & 1) set.push_back(i);
    sets.push_back(set);
  }
  std::sort(sets.begin(), sets.end());
  for (const auto& set : sets) {
    std::vector<double> w(n, 0.0);
    for (std::size_t i : set) w[i] = 1.0;
    const double lambda = testing::brute_covariance_top(rows, d, w).value;
    if (lambda < best) best = lambda, best_set = set;
  }
  *value = best;
  return best_set;
}

TEST(Smea, MatchesBruteForce) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 3u, 6u, 9u}) {
      for (std::size_t f = 0; 2 * f + 1 <= n; ++f) {
        const std::size_t d = 4;
        const auto rows = gaussian_rows(n, d, 300 + 13 * n + f);
        auto result = Smea(SmeaOptions{f, 1e6, 1}).aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        double value = 0;
        const auto want = brute_smea(rows, n, d, f, &value);
        EXPECT_EQ(result->report.selected, want) << "n=" << n << " f=" << f;
        EXPECT_NEAR(result->report.scores[0], value, 1e-5 * (1 + value));
        testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, want), 1e-5);
      }
    }
  });
}

// In one dimension λ_max is the variance: of the 3-subsets of {0, 1, 3, 10}, {0, 1, 3} has the
// smallest, 14/9, and its mean 4/3 is the output.
TEST(Smea, HandComputedInOneDimension) {
  const std::vector<float> rows{10, 0, 3, 1};
  auto result = Smea(SmeaOptions{1, 1e6, 1}).aggregate(InputMatrix(rows.data(), 4, 1));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_NEAR(result->value[0], 4.0 / 3.0, 1e-6);
  EXPECT_NEAR(result->report.scores[0], 14.0 / 9.0, 1e-6);
}

// ByzFL's documented example, SMEA(f=1) on three collinear points: {0, 1} and {1, 2} tie at
// λ = 27/4 and the first subset wins.
TEST(Smea, ByzflDocumentedExample) {
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto result = Smea(SmeaOptions{1, 1e6, 1}).aggregate(InputMatrix(rows.data(), 3, 3));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1}));
  testing::expect_near_vectors(result->value, {2.5f, 3.5f, 4.5f}, 1e-6);
  EXPECT_NEAR(result->report.scores[0], 27.0 / 4.0, 1e-5);
}

TEST(Smea, ByzantineInputsMoveTheMeanButNotSmea) {
  const std::size_t n = 9, f = 2, d = 30;
  auto rows = gaussian_rows(n, d, 31);
  for (std::size_t j = 0; j < d; ++j) rows[1 * d + j] = 40.0f, rows[6 * d + j] = -40.0f * (j % 2 ? 1 : -1);
  auto result = Smea(SmeaOptions{f, 1e6, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  const std::vector<std::size_t> honest{0, 2, 3, 4, 5, 7, 8};
  EXPECT_EQ(result->report.selected, honest);
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, honest), 1e-5);
  const auto mean = testing::mean_of_rows(rows, d, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  const auto center = testing::mean_of_rows(rows, d, honest);
  EXPECT_GT(std::sqrt(testing::squared_distance(mean.data(), center.data(), d)), 5.0);
}

TEST(Smea, TiesGoToTheFirstSubsetAndThreadsDoNotChangeTheChoice) {
  const std::vector<float> same(7 * 3, 1.0f);
  auto tie = Smea(SmeaOptions{3, 1e6, 1}).aggregate(InputMatrix(same.data(), 7, 3));
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->report.selected, (std::vector<std::size_t>{0, 1, 2, 3}));
  const auto rows = gaussian_rows(12, 50, 4);
  auto one = Smea(SmeaOptions{4, 1e6, 1}).aggregate(InputMatrix(rows.data(), 12, 50));
  ASSERT_TRUE(one.ok());
  for (std::size_t threads : {2u, 3u, 7u}) {
    auto many = Smea(SmeaOptions{4, 1e6, threads}).aggregate(InputMatrix(rows.data(), 12, 50));
    ASSERT_TRUE(many.ok());
    EXPECT_EQ(many->report.selected, one->report.selected) << threads;
    EXPECT_EQ(many->value, one->value) << threads;
  }
}

TEST(Smea, RefusesExponentialWorkWithAClearError) {
  std::vector<float> rows(100 * 4, 1.0f);
  auto result = Smea(SmeaOptions{24, 1e6, 1}).aggregate(InputMatrix(rows.data(), 100, 4));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kLimitExceeded);
  EXPECT_NE(result.error().message.find("C(100, 24)"), std::string::npos) << result.error().message;
}

TEST(Smea, PreconditionNamesTheBound) {
  const auto status = Smea::check(6, 3);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(status.error().message, "smea needs n >= 2f + 1 (n = 6, f = 3)");
  EXPECT_TRUE(Smea::check(7, 3).ok());
  EXPECT_EQ(Smea(SmeaOptions{0, 0.5, 1}).check(3).error().code, ErrorCode::kInvalidArgument);
}

TEST(Smea, NonFiniteInputsAreExcludedAndCountAgainstF) {
  const std::size_t n = 7, f = 2, d = 5;
  auto rows = gaussian_rows(n, d, 17);
  rows[0 * d + 1] = std::numeric_limits<float>::infinity();
  rows[5 * d + 3] = std::numeric_limits<float>::quiet_NaN();
  rows[6 * d + 0] = -std::numeric_limits<float>::infinity();
  auto result = Smea(SmeaOptions{f, 1e6, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{0, 5, 6}));
  // Three non-finite inputs > f: every finite input is kept.
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{1, 2, 3, 4}));
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, {1, 2, 3, 4}), 1e-6);
}

TEST(Smea, RegistrySpecRoundTrips) {
  auto rule = make_aggregator("smea:f=1,max_subsets=5000,threads=2");
  ASSERT_TRUE(rule.ok()) << rule.error().to_string();
  EXPECT_EQ((*rule)->spec(), "smea:f=1,max_subsets=5000,threads=2");
  auto again = make_aggregator((*rule)->spec());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->spec(), (*rule)->spec());
  EXPECT_EQ(Smea().spec(), "smea:f=0,max_subsets=1e+06");
  EXPECT_FALSE(make_aggregator("smea:f=1,max_subsets=0").ok());
}

}  // namespace
}  // namespace ballot::robust
