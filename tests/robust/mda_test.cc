#include "robust/mda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Every subset of size n − f, by bitmask.
std::vector<std::size_t> brute_mda(const std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t f) {
  double best = INFINITY;
  std::vector<std::size_t> best_set;
  for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (static_cast<std::size_t>(__builtin_popcount(mask)) != n - f) continue;
    std::vector<std::size_t> set;
    for (std::size_t i = 0; i < n; ++i)
      if (mask >> i & 1) set.push_back(i);
    double diameter = 0;
    for (std::size_t a : set)
      for (std::size_t b : set) diameter = std::max(diameter, testing::squared_distance(&rows[a * d], &rows[b * d], d));
    if (diameter < best) best = diameter, best_set = set;
  }
  return best_set;
}

TEST(MinimumDiameterAveraging, MatchesBruteForce) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 3u, 6u, 9u, 12u}) {
      for (std::size_t f = 0; 2 * f + 1 <= n; ++f) {
        const std::size_t d = 30;
        const auto rows = gaussian_rows(n, d, 500 + 13 * n + f);
        auto result = MinimumDiameterAveraging(MinimumDiameterAveragingOptions{f, 1e6, 1})
                          .aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        const auto want = brute_mda(rows, n, d, f);
        EXPECT_EQ(result->report.selected, want) << "n=" << n << " f=" << f;
        testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, want), 1e-5);
      }
    }
  });
}

TEST(MinimumDiameterAveraging, RefusesExponentialWorkWithAClearError) {
  std::vector<float> rows(100 * 4, 1.0f);
  auto result =
      MinimumDiameterAveraging(MinimumDiameterAveragingOptions{24, 1e6, 1}).aggregate(InputMatrix(rows.data(), 100, 4));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kLimitExceeded);
  EXPECT_NE(result.error().message.find("C(100, 24)"), std::string::npos) << result.error().message;
  EXPECT_TRUE(MinimumDiameterAveraging(MinimumDiameterAveragingOptions{24, 1e30, 1}).check(100).ok());
}

TEST(MinimumDiameterAveraging, ExcludesOutliersAndNonFinite) {
  const std::size_t n = 9, f = 3, d = 20;
  auto rows = gaussian_rows(n, d, 9);
  for (std::size_t c = 0; c < d; ++c) rows[3 * d + c] = 1e4f, rows[5 * d + c] = -1e4f;
  rows[7 * d + 2] = std::numeric_limits<float>::quiet_NaN();
  auto result =
      MinimumDiameterAveraging(MinimumDiameterAveragingOptions{f, 1e6, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, std::vector<std::size_t>{7});
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1, 2, 4, 6, 8}));
  EXPECT_EQ(MinimumDiameterAveraging::check(2 * f, f).error().code, ErrorCode::kPrecondition);
}

}  // namespace
}  // namespace ballot::robust
