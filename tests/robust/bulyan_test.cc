#include "robust/bulyan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Brute force: repeated Krum with full sorts, then per coordinate the β values closest to the
// median of the θ selected (ranked by distance with a full sort).
std::pair<std::vector<std::size_t>, std::vector<float>> brute_bulyan(const std::vector<float>& rows, std::size_t n,
                                                                     std::size_t d, std::size_t f) {
  const std::size_t theta = n - 2 * f, beta = theta - 2 * f;
  std::vector<std::size_t> remaining(n), selected;
  std::iota(remaining.begin(), remaining.end(), 0);
  while (selected.size() < theta) {
    const auto scores = testing::brute_krum_scores(rows, d, remaining, f);
    const auto best = static_cast<std::size_t>(std::min_element(scores.begin(), scores.end()) - scores.begin());
    selected.push_back(remaining[best]);
    remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(best));
  }
  std::sort(selected.begin(), selected.end());
  std::vector<float> out(d);
  for (std::size_t c = 0; c < d; ++c) {
    std::vector<double> v;
    for (std::size_t i : selected) v.push_back(rows[i * d + c]);
    std::sort(v.begin(), v.end());
    const double med = 0.5 * (v[(theta - 1) / 2] + v[theta / 2]);
    std::stable_sort(v.begin(), v.end(), [med](double a, double b) { return std::abs(a - med) < std::abs(b - med); });
    out[c] = static_cast<float>(std::accumulate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(beta), 0.0) /
                                static_cast<double>(beta));
  }
  return {selected, out};
}

TEST(Bulyan, MatchesBruteForce) {
  testing::for_each_isa([] {
    for (std::size_t n : {3u, 7u, 8u, 11u, 15u, 25u}) {
      for (std::size_t f = 0; 4 * f + 3 <= n; ++f) {
        const std::size_t d = 97;
        const auto rows = gaussian_rows(n, d, 1000 + 10 * n + f);
        auto result = Bulyan(BulyanOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        const auto [selected, value] = brute_bulyan(rows, n, d, f);
        EXPECT_EQ(result->report.selected, selected) << "n=" << n << " f=" << f;
        testing::expect_near_vectors(result->value, value, 1e-5);
      }
    }
  });
}

// n = 7, f = 1: θ = 5 inputs survive Krum, β = 3. On a coordinate whose selected values are
// {0, 0, 1, 1, 3} the median is 1 and the three closest values are 1, 1 and a 0: 2/3 (the lowest
// of the windows with the same largest distance, {0, 0, 1}, gave 1/3).
TEST(Bulyan, SecondStepKeepsTheClosestValuesWhenWindowsTie) {
  testing::for_each_isa([] {
    const std::size_t n = 7, d = 2;
    // Coordinate 0 is the tied one; coordinate 1 is 0 everywhere so Krum's distances are
    // coordinate 0's alone.
    const std::vector<float> column = {0, 1, 0, 1, 3, 0, 1};
    std::vector<float> rows;
    for (const float v : column) rows.insert(rows.end(), {v, 0.0f});
    auto result = Bulyan(BulyanOptions{1, 1}).aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    const auto [selected, value] = brute_bulyan(rows, n, d, 1);
    EXPECT_EQ(result->report.selected, selected);
    std::vector<float> picked;
    for (std::size_t i : selected) picked.push_back(column[i]);
    std::sort(picked.begin(), picked.end());
    ASSERT_EQ(picked, (std::vector<float>{0, 0, 1, 1, 3}));
    EXPECT_FLOAT_EQ(result->value[0], 2.0f / 3.0f);
    EXPECT_FLOAT_EQ(value[0], 2.0f / 3.0f);
  });
}

TEST(Bulyan, PreconditionAtItsEdge) {
  for (std::size_t f : {0u, 1u, 3u}) {
    const auto below = Bulyan::check(4 * f + 2, f);
    ASSERT_FALSE(below.ok());
    EXPECT_EQ(below.error().code, ErrorCode::kPrecondition);
    EXPECT_NE(below.error().message.find("n >= 4f + 3"), std::string::npos);
    EXPECT_TRUE(Bulyan::check(4 * f + 3, f).ok());
  }
}

TEST(Bulyan, StaysWithinHonestRangeAndExcludesNonFinite) {
  const std::size_t n = 15, f = 3, d = 128;
  auto rows = gaussian_rows(n, d, 4);
  for (std::size_t c = 0; c < d; ++c) {
    rows[0 * d + c] = c % 2 ? 1e30f : -1e30f;
    rows[1 * d + c] = 0.5f;  // a crafted inlier-looking vector
  }
  rows[2 * d + 17] = std::numeric_limits<float>::quiet_NaN();
  auto result = Bulyan(BulyanOptions{f, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, std::vector<std::size_t>{2});
  EXPECT_EQ(result->report.selected.size(), n - 2 * f);
  for (std::size_t i : result->report.selected) EXPECT_TRUE(i != 0 && i != 2);
  for (std::size_t c = 0; c < d; ++c) {
    float lo = INFINITY, hi = -INFINITY;
    for (std::size_t i = 3; i < n; ++i) lo = std::min(lo, rows[i * d + c]), hi = std::max(hi, rows[i * d + c]);
    EXPECT_GE(result->value[c], std::min(lo, 0.5f));
    EXPECT_LE(result->value[c], std::max(hi, 0.5f));
  }
}

TEST(Bulyan, TooFewUsableInputsIsAnError) {
  const std::size_t n = 7, d = 8;
  auto rows = gaussian_rows(n, d, 4);
  for (std::size_t i = 0; i < 3; ++i) rows[i * d] = std::numeric_limits<float>::infinity();
  auto result = Bulyan(BulyanOptions{1, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
}

}  // namespace
}  // namespace ballot::robust
