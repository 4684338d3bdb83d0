#include "robust/geometric_median.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Smoothed Weiszfeld directly on the vectors, in double (RFA Algorithm 3).
// From the mean, or from 0 with `from_zero`.
std::vector<double> brute_weiszfeld(const std::vector<float>& rows, std::size_t n, std::size_t d, double nu,
                                    std::size_t iterations, bool from_zero = false) {
  std::vector<double> v(d, 0.0);
  for (std::size_t i = 0; i < n && !from_zero; ++i)
    for (std::size_t c = 0; c < d; ++c) v[c] += rows[i * d + c] / static_cast<double>(n);
  for (std::size_t it = 0; it < iterations; ++it) {
    std::vector<double> next(d, 0.0);
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double s = 0;
      for (std::size_t c = 0; c < d; ++c) s += (v[c] - rows[i * d + c]) * (v[c] - rows[i * d + c]);
      const double w = 1.0 / std::max(nu, std::sqrt(s));
      total += w;
      for (std::size_t c = 0; c < d; ++c) next[c] += w * rows[i * d + c];
    }
    for (std::size_t c = 0; c < d; ++c) v[c] = next[c] / total;
  }
  return v;
}

double objective(const std::vector<float>& rows, std::size_t n, std::size_t d, const std::vector<float>& v) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::sqrt(testing::squared_distance(&rows[i * d], v.data(), d));
  return sum;
}

TEST(GeometricMedian, MatchesDirectWeiszfeld) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 2u, 5u, 10u, 25u}) {
      const std::size_t d = 50;
      const auto rows = gaussian_rows(n, d, 40 + n);
      GeometricMedianOptions options;
      options.max_iterations = 30;
      options.tolerance = 0;  // run until the objective stops decreasing, at most 30 steps
      auto result = GeometricMedian(options).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(result.ok()) << result.error().to_string();
      EXPECT_GE(result->report.iterations, 1u);
      EXPECT_LE(result->report.iterations, 30u);
      const auto want = brute_weiszfeld(rows, n, d, options.nu, result->report.iterations);
      for (std::size_t c = 0; c < d; ++c) ASSERT_NEAR(result->value[c], want[c], 1e-4) << "n=" << n << " c=" << c;
    }
  });
}

// ByzFL's GeometricMedian(nu, T): from 0, exactly T steps (start=zero, a negative tolerance).
TEST(GeometricMedian, FromZeroTakesExactlyTheGivenSteps) {
  testing::for_each_isa([] {
    for (std::size_t steps : {0u, 1u, 3u, 8u}) {
      const std::size_t n = 7, d = 40;
      const auto rows = gaussian_rows(n, d, 70 + steps);
      GeometricMedianOptions options;
      options.start = WeiszfeldStart::kZero;
      options.max_iterations = steps;
      options.nu = 0.1;
      options.tolerance = -1;
      auto result = GeometricMedian(options).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(result.ok()) << result.error().to_string();
      EXPECT_EQ(result->report.iterations, steps);
      const auto want = brute_weiszfeld(rows, n, d, options.nu, steps, /*from_zero=*/true);
      for (std::size_t c = 0; c < d; ++c) ASSERT_NEAR(result->value[c], want[c], 1e-4) << "T=" << steps << " c=" << c;
    }
  });
  auto spec = make_aggregator("geometric_median:start=zero,max_iterations=3,nu=0.1,tolerance=-1");
  ASSERT_TRUE(spec.ok()) << spec.error().to_string();
  EXPECT_EQ((*spec)->spec(), "geometric_median:f=0,start=zero,max_iterations=3,nu=0.1,tolerance=-1");
  EXPECT_FALSE(make_aggregator("geometric_median:start=median").ok());
  EXPECT_FALSE(make_aggregator("geometric_median:tolerance=inf").ok());
}

TEST(GeometricMedian, ConvergesToTheMinimiser) {
  const std::size_t n = 9, d = 20;
  const auto rows = gaussian_rows(n, d, 3);
  auto result = GeometricMedian().aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  EXPECT_LT(result->report.iterations, 100u);
  // No small step in any coordinate direction improves the objective.
  const double best = objective(rows, n, d, result->value);
  for (std::size_t c = 0; c < d; ++c)
    for (float step : {-1e-3f, 1e-3f}) {
      auto moved = result->value;
      moved[c] += step;
      EXPECT_GE(objective(rows, n, d, moved), best - 1e-6);
    }
}

TEST(GeometricMedian, RobustToAMinorityOfOutliersAndNonFinite) {
  const std::size_t n = 11, f = 5, d = 32;
  auto rows = gaussian_rows(n, d, 6);
  for (std::size_t i = 0; i < f - 1; ++i)
    for (std::size_t c = 0; c < d; ++c) rows[i * d + c] = 1e6f;
  rows[(f - 1) * d + 3] = std::numeric_limits<float>::quiet_NaN();
  auto result =
      GeometricMedian(GeometricMedianOptions{f, 100, 1e-6, 1e-8, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, std::vector<std::size_t>{f - 1});
  // Within a few honest radii of the honest points (the outliers are 1e6 away).
  std::vector<std::size_t> honest;
  for (std::size_t i = f; i < n; ++i) honest.push_back(i);
  const auto center = testing::mean_of_rows(rows, d, honest);
  double radius = 0;
  for (std::size_t i : honest)
    radius = std::max(radius, std::sqrt(testing::squared_distance(&rows[i * d], center.data(), d)));
  EXPECT_LT(std::sqrt(testing::squared_distance(result->value.data(), center.data(), d)), 2 * radius);
}

TEST(GeometricMedian, ChecksOptionsAndBound) {
  EXPECT_FALSE(GeometricMedian::check(4, 2).ok());
  EXPECT_TRUE(GeometricMedian::check(5, 2).ok());
  EXPECT_FALSE(GeometricMedian(GeometricMedianOptions{0, 10, 0.0, 0, 1}).check(3).ok());
  EXPECT_FALSE(
      GeometricMedian(GeometricMedianOptions{0, 10, 1e-6, std::numeric_limits<double>::quiet_NaN(), 1}).check(3).ok());
  EXPECT_TRUE(GeometricMedian(GeometricMedianOptions{0, 10, 1e-6, -1, 1}).check(3).ok());  // never stop early
}

}  // namespace
}  // namespace ballot::robust
