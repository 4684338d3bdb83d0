#include "robust/centered_clipping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>

#include "robust/detail/isa_kernels.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Karimireddy et al. eq. (3) directly on the vectors, in double.
std::vector<double> brute_cc(const std::vector<float>& rows, std::size_t n, std::size_t d, double tau,
                             std::size_t iterations, std::vector<double> v) {
  for (std::size_t it = 0; it < iterations; ++it) {
    std::vector<double> step(d, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      double s = 0;
      for (std::size_t c = 0; c < d; ++c) s += (rows[i * d + c] - v[c]) * (rows[i * d + c] - v[c]);
      const double scale = std::sqrt(s) > tau ? tau / std::sqrt(s) : 1.0;
      for (std::size_t c = 0; c < d; ++c) step[c] += scale * (rows[i * d + c] - v[c]) / static_cast<double>(n);
    }
    for (std::size_t c = 0; c < d; ++c) v[c] += step[c];
  }
  return v;
}

TEST(CenteredClipping, MatchesDirectIterationsFromEachStart) {
  const std::size_t n = 9, d = 40;
  const auto rows = gaussian_rows(n, d, 17, 1.0, 2.0);
  testing::for_each_isa([&] {
    // One iteration runs on the vectors, more on the Gram matrix: both must match.
    for (auto [tau, iterations] : {std::pair{0.5, 4u}, {3.0, 4u}, {100.0, 4u}, {0.5, 1u}, {3.0, 1u}, {100.0, 1u}}) {
      CenteredClippingOptions options;
      options.tau = tau;
      options.iterations = iterations;
      auto zero = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(zero.ok()) << zero.error().to_string();
      const auto want = brute_cc(rows, n, d, tau, iterations, std::vector<double>(d, 0.0));
      for (std::size_t c = 0; c < d; ++c)
        ASSERT_NEAR(zero->value[c], want[c], 1e-4) << "L=" << iterations << " c=" << c;

      std::vector<float> center(d);
      for (std::size_t c = 0; c < d; ++c) center[c] = 0.1f * static_cast<float>(c);
      options.center = center;
      auto given = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(given.ok());
      const auto want_given = brute_cc(rows, n, d, tau, iterations, std::vector<double>(center.begin(), center.end()));
      for (std::size_t c = 0; c < d; ++c)
        ASSERT_NEAR(given->value[c], want_given[c], 1e-4) << "L=" << iterations << " c=" << c;

      options.center.clear();
      options.start = ClippingStart::kMedian;
      auto median = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(median.ok());
      std::vector<double> start(d);
      for (std::size_t c = 0; c < d; ++c) {
        auto col = testing::column(rows, n, d, c);
        std::sort(col.begin(), col.end());
        start[c] = col[n / 2];
      }
      const auto want_median = brute_cc(rows, n, d, tau, iterations, start);
      for (std::size_t c = 0; c < d; ++c)
        ASSERT_NEAR(median->value[c], want_median[c], 1e-4) << "L=" << iterations << " c=" << c;
    }
  });
}

TEST(CenteredClipping, OutliersMoveTheCenterByAtMostTheirClippedShare) {
  const std::size_t n = 10, f = 2, d = 16;
  auto rows = gaussian_rows(n, d, 2, 0.1);
  for (std::size_t c = 0; c < d; ++c) rows[c] = 1e20f, rows[d + c] = -3e38f;
  rows[2 * d + 4] = std::numeric_limits<float>::infinity();
  for (std::size_t iterations : {1u, 3u}) {
    CenteredClippingOptions options;
    options.f = f;
    options.tau = 1.0;
    options.iterations = iterations;
    auto result = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(result->report.non_finite, std::vector<std::size_t>{2});
    // Each iteration moves v by at most τ in norm, so after L iterations ‖v‖ ≤ L·τ from v₀ = 0.
    double norm = 0;
    for (float v : result->value) norm += static_cast<double>(v) * v;
    EXPECT_LE(std::sqrt(norm), static_cast<double>(iterations) + 1e-5) << "L=" << iterations;
  }
}

TEST(CenteredClipping, OneIterationGivesTheSameBitsForAnyThreadCount) {
  const std::size_t n = 13, d = 5000;
  const auto rows = gaussian_rows(n, d, 9);
  CenteredClippingOptions options;
  options.tau = 20.0;
  options.iterations = 1;
  options.center.assign(d, 0.25f);
  auto one = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
  options.threads = 3;
  auto three = CenteredClipping(options).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(one->value, three->value);
}

// The distance kernel of the one-iteration path: the squared norm of the rounded difference, bit
// for bit, at every ISA level and length (blocks, lanes and tails).
TEST(CenteredClipping, SquaredDistanceKernelIsTheNormOfTheDifference) {
  testing::for_each_isa([] {
    const auto& kern = detail::isa_kernels();
    for (std::size_t d : {0u, 1u, 15u, 16u, 17u, 1023u, 1024u, 1025u, 5000u}) {
      const auto x = gaussian_rows(1, d, 3 + d), y = gaussian_rows(1, d, 4 + d, 2.0, 1.0);
      std::vector<float> diff(d);
      for (std::size_t c = 0; c < d; ++c) diff[c] = x[c] - y[c];
      EXPECT_EQ(kern.squared_distance(x.data(), y.data(), d), kern.squared_norm(diff.data(), d)) << "d=" << d;
    }
  });
}

TEST(CenteredClipping, ValidatesOptionsAndCenter) {
  EXPECT_FALSE(CenteredClipping::check(4, 2).ok());
  EXPECT_TRUE(CenteredClipping::check(5, 2).ok());
  CenteredClippingOptions options;
  options.tau = 0;
  EXPECT_FALSE(CenteredClipping(options).check(3).ok());
  options.tau = 1;
  options.center = {1.0f, 2.0f};
  std::vector<float> rows(3 * 4, 1.0f);
  auto wrong = CenteredClipping(options).aggregate(InputMatrix(rows.data(), 3, 4));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kInvalidArgument);
  options.center = {1.0f, 2.0f, NAN, 0.0f};
  EXPECT_FALSE(CenteredClipping(options).aggregate(InputMatrix(rows.data(), 3, 4)).ok());
}

TEST(CenteredClipping, SetCenterIsUsedByTheNextCall) {
  const std::size_t n = 5, d = 8;
  const auto rows = gaussian_rows(n, d, 1);
  CenteredClippingOptions options;
  options.tau = 0.01;
  options.iterations = 1;
  CenteredClipping rule(options);
  std::vector<float> center(d, 50.0f);
  rule.set_center(center);
  auto result = rule.aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  for (float v : result->value) EXPECT_NEAR(v, 50.0f, 0.02f);
}

}  // namespace
}  // namespace ballot::robust
