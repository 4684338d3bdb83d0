#include "robust/caf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// CAF (Allouah, Guerraoui, Stephan 2025, Algorithm 2) written out with the d×d covariance, for
// small d: the weights of the iterate of smallest λ_max.
std::vector<double> brute_caf(const std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t f) {
  std::vector<double> c(n, 1.0), best = c;
  double best_value = INFINITY;
  auto total = [&] {
    double s = 0;
    for (double x : c) s += x;
    return s;
  };
  while (total() > static_cast<double>(n - 2 * f)) {
    const auto top = testing::brute_covariance_top(rows, d, c);
    if (top.value < best_value) best_value = top.value, best = c;
    std::vector<double> tau(n);
    double tau_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double p = 0;
      for (std::size_t j = 0; j < d; ++j) p += (rows[i * d + j] - top.mean[j]) * top.vector[j];
      tau[i] = p * p;
      if (c[i] > 0) tau_max = std::max(tau_max, tau[i]);
    }
    if (!(tau_max > 0)) break;
    for (std::size_t i = 0; i < n; ++i) c[i] *= 1 - tau[i] / tau_max;
  }
  return best;
}

std::vector<float> weighted_mean(const std::vector<float>& rows, std::size_t d, const std::vector<double>& c) {
  double total = 0;
  for (double x : c) total += x;
  std::vector<float> out(d);
  for (std::size_t j = 0; j < d; ++j) {
    double s = 0;
    for (std::size_t i = 0; i < c.size(); ++i) s += c[i] * rows[i * d + j];
    out[j] = static_cast<float>(s / total);
  }
  return out;
}

// Three points on a line, f = 1: the first step removes the outlier at 100 entirely
// (c = 1 − τ/τ_max with τ_i = (x_i − 34)²), leaving c_0 = 1 − 34²/66², c_1 = 1 − 32²/66²; the
// second step's covariance (of {0, 2}) has the smaller λ, so the output is its weighted mean
// 2c_1 / (c_0 + c_1) = 6664 / 6532.
TEST(Caf, HandComputedOnALine) {
  const std::vector<float> rows{0, 0, 2, 0, 100, 0};
  auto result = Caf(CafOptions{1, 1}).aggregate(InputMatrix(rows.data(), 3, 2));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_NEAR(result->value[0], 6664.0 / 6532.0, 1e-6);
  EXPECT_EQ(result->value[1], 0.0f);
  EXPECT_EQ(result->report.iterations, 2u);
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(result->report.excluded, std::vector<std::size_t>{2});
  EXPECT_NEAR(result->report.scores[0], 3200.0 / 4356.0, 1e-12);
  EXPECT_NEAR(result->report.scores[1], 3332.0 / 4356.0, 1e-12);
}

// ByzFL's documented example, CAF(f=1) on three collinear points: the first step's covariance is
// rank one along (1, 1, 1), both end points have the largest projection and drop to weight 0, and
// the first iterate (the mean (4, 5, 6)) is the output.
TEST(Caf, ByzflDocumentedExample) {
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto result = Caf(CafOptions{1, 1}).aggregate(InputMatrix(rows.data(), 3, 3));
  ASSERT_TRUE(result.ok());
  testing::expect_near_vectors(result->value, {4, 5, 6}, 1e-6);
  EXPECT_EQ(result->report.iterations, 1u);
}

TEST(Caf, WithoutByzantineInputsItIsTheMean) {
  const auto rows = gaussian_rows(6, 10, 3);
  auto result = Caf(CafOptions{0, 1}).aggregate(InputMatrix(rows.data(), 6, 10));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->report.iterations, 0u);
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, 10, {0, 1, 2, 3, 4, 5}), 1e-6);
}

TEST(Caf, MatchesTheAlgorithmWrittenOutInFullDimension) {
  testing::for_each_isa([] {
    for (std::size_t d : {1u, 2u, 5u}) {
      for (std::size_t n : {3u, 6u, 9u}) {
        for (std::size_t f = 1; 2 * f + 1 <= n; ++f) {
          auto rows = gaussian_rows(n, d, 700 + 10 * n + f + 100 * d);
          for (std::size_t j = 0; j < d; ++j) rows[j] += 8.0f;  // one far input
          auto result = Caf(CafOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
          ASSERT_TRUE(result.ok()) << result.error().to_string();
          const auto want = brute_caf(rows, n, d, f);
          for (std::size_t i = 0; i < n; ++i)
            EXPECT_NEAR(result->report.scores[i], want[i], 1e-5) << "n=" << n << " f=" << f << " d=" << d << " i=" << i;
          testing::expect_near_vectors(result->value, weighted_mean(rows, d, want), 1e-5);
        }
      }
    }
  });
}

// Two colluding inputs far along one direction drag the mean away; CAF's first step sees them as
// the top eigendirection and removes them.
TEST(Caf, ByzantineInputsMoveTheMeanButNotCaf) {
  const std::size_t n = 9, f = 2, d = 40;
  auto rows = gaussian_rows(n, d, 21);
  for (std::size_t i : {3u, 7u})
    for (std::size_t j = 0; j < d; ++j) rows[i * d + j] = 50.0f;
  std::vector<std::size_t> honest{0, 1, 2, 4, 5, 6, 8};
  const auto center = testing::mean_of_rows(rows, d, honest);
  auto result = Caf(CafOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  for (std::size_t i : {3u, 7u}) EXPECT_EQ(result->report.scores[i], 0.0) << i;
  const auto mean = testing::mean_of_rows(rows, d, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  double radius = 0;
  for (std::size_t i : honest)
    radius = std::max(radius, std::sqrt(testing::squared_distance(&rows[i * d], center.data(), d)));
  EXPECT_GT(std::sqrt(testing::squared_distance(mean.data(), center.data(), d)), 10 * radius);
  EXPECT_LT(std::sqrt(testing::squared_distance(result->value.data(), center.data(), d)), radius);
}

TEST(Caf, IdenticalInputsStopAtZeroCovariance) {
  const std::vector<float> rows(5 * 3, 2.5f);
  auto result = Caf(CafOptions{2, 1}).aggregate(InputMatrix(rows.data(), 5, 3));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->value, std::vector<float>(3, 2.5f));
  EXPECT_EQ(result->report.iterations, 1u);
}

TEST(Caf, PreconditionNamesTheBound) {
  const auto status = Caf::check(4, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(status.error().message, "caf needs n >= 2f + 1 (n = 4, f = 2)");
  EXPECT_TRUE(Caf::check(5, 2).ok());
  std::vector<float> rows(4 * 2, 1.0f);
  auto result = Caf(CafOptions{2, 1}).aggregate(InputMatrix(rows.data(), 4, 2));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
}

// k non-finite inputs count against f: with f = 1 and one NaN input, CAF runs on the other four
// with f = 0, i.e. it is their mean.
TEST(Caf, NonFiniteInputsCountAgainstF) {
  const std::size_t n = 5, d = 6;
  auto rows = gaussian_rows(n, d, 8);
  rows[2 * d + 4] = std::numeric_limits<float>::quiet_NaN();
  auto result = Caf(CafOptions{1, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, std::vector<std::size_t>{2});
  EXPECT_EQ(result->report.excluded, std::vector<std::size_t>{2});
  EXPECT_EQ(result->report.scores[2], 0.0);
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, {0, 1, 3, 4}), 1e-6);
  std::fill(rows.begin(), rows.end(), std::numeric_limits<float>::infinity());
  auto none = Caf(CafOptions{1, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kPrecondition);
}

TEST(Caf, RegistrySpecRoundTrips) {
  auto rule = make_aggregator("caf:f=2,threads=3");
  ASSERT_TRUE(rule.ok()) << rule.error().to_string();
  EXPECT_EQ((*rule)->spec(), "caf:f=2,threads=3");
  auto again = make_aggregator((*rule)->spec());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->spec(), "caf:f=2,threads=3");
  EXPECT_EQ(Caf().spec(), "caf:f=0");
  EXPECT_FALSE((*rule)->check(4).ok());
  EXPECT_FALSE(make_aggregator("caf:f=1,tau=2").ok());
}

}  // namespace
}  // namespace ballot::robust
