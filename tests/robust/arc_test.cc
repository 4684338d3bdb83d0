#include "robust/arc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Brute force: sort the norms, clip every input to the (k+1)-th largest.
std::vector<float> brute_arc(const std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t f) {
  std::vector<double> norm(n);
  for (std::size_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < d; ++j) s += static_cast<double>(rows[i * d + j]) * rows[i * d + j];
    norm[i] = std::sqrt(s);
  }
  std::vector<double> sorted = norm;
  std::sort(sorted.rbegin(), sorted.rend());
  const std::size_t k =
      static_cast<std::size_t>(std::floor(2.0 * static_cast<double>(f * (n - f)) / static_cast<double>(n)));
  const double c = sorted[k];
  std::vector<float> out(rows.size());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < d; ++j)
      out[i * d + j] = static_cast<float>(rows[i * d + j] * std::min(1.0, c / norm[i]));
  return out;
}

TEST(AdaptiveRobustClipping, ClippedCountIsExact) {
  EXPECT_EQ(AdaptiveRobustClipping::clipped(3, 1), 1u);
  EXPECT_EQ(AdaptiveRobustClipping::clipped(10, 2), 3u);  // ⌊32/10⌋
  EXPECT_EQ(AdaptiveRobustClipping::clipped(9, 4), 4u);   // ⌊40/9⌋
  EXPECT_EQ(AdaptiveRobustClipping::clipped(7, 0), 0u);
  // 2·33·209 / 242 = 57 exactly; (2·33/242)·209 in double is 56.99999999999999.
  EXPECT_EQ(AdaptiveRobustClipping::clipped(242, 33), 57u);
}

// ByzFL's documented example: f = 1, n = 3, so k = 1 and the largest input (7, 8, 9) is scaled
// to the norm √77 of (4, 5, 6).
TEST(AdaptiveRobustClipping, HandComputed) {
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto out = AdaptiveRobustClipping(AdaptiveRobustClippingOptions{1, 1}).apply(InputMatrix(rows.data(), 3, 3));
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  ASSERT_EQ(out->output.n, 3u);
  const std::vector<float> kept(out->output.values.begin(), out->output.values.begin() + 6);
  EXPECT_EQ(kept, std::vector<float>(rows.begin(), rows.begin() + 6));
  const double scale = std::sqrt(77.0 / 194.0);
  EXPECT_NEAR(out->output.values[6], 7 * scale, 1e-6);
  EXPECT_NEAR(out->output.values[7], 8 * scale, 1e-6);
  EXPECT_NEAR(out->output.values[8], 9 * scale, 1e-6);
  EXPECT_NEAR(out->output.values[6], 4.41004009, 1e-6);
  EXPECT_TRUE(out->non_finite.empty());
}

TEST(AdaptiveRobustClipping, MatchesBruteForce) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 2u, 5u, 10u, 17u}) {
      for (std::size_t f = 0; 2 * f + 1 <= n; ++f) {
        const std::size_t d = 300;
        auto rows = gaussian_rows(n, d, 40 + n + 7 * f);
        for (std::size_t i = 0; i < n; ++i)  // norms spread over two orders of magnitude
          for (std::size_t j = 0; j < d; ++j) rows[i * d + j] *= static_cast<float>(1 + 10 * i % 7);
        auto out = AdaptiveRobustClipping(AdaptiveRobustClippingOptions{f, 1}).apply(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(out.ok()) << out.error().to_string();
        testing::expect_near_vectors(out->output.values, brute_arc(rows, n, d, f), 1e-6);
      }
    }
  });
}

// The attackers' huge inputs dominate the mean; after ARC their norm is at most the (k+1)-th
// largest, so the mean of ARC's outputs stays within the honest norms.
TEST(AdaptiveRobustClipping, ByzantineInputsMoveTheMeanButNotArcThenMean) {
  const std::size_t n = 10, d = 20;  // f = 2: k = ⌊2·2·8/10⌋ = 3
  auto rows = gaussian_rows(n, d, 14);
  for (std::size_t j = 0; j < d; ++j) rows[4 * d + j] = 1e5f, rows[8 * d + j] = 1e5f;
  double honest_max = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (i != 4 && i != 8)
      honest_max = std::max(honest_max,
                            std::sqrt(testing::squared_distance(&rows[i * d], std::vector<float>(d, 0.0f).data(), d)));
  auto pipeline = make_aggregator("arc:f=2 > mean");
  ASSERT_TRUE(pipeline.ok());
  auto result = (*pipeline)->aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  const std::vector<float> zero(d, 0.0f);
  EXPECT_LE(std::sqrt(testing::squared_distance(result->value.data(), zero.data(), d)), honest_max);
  const auto mean = testing::mean_of_rows(rows, d, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_GT(std::sqrt(testing::squared_distance(mean.data(), zero.data(), d)), 1000 * honest_max);
}

// A non-finite input ranks as the largest norm and passes through unchanged; the finite inputs
// come out exactly as if it were a finite input larger than all of them.
TEST(AdaptiveRobustClipping, NonFiniteInputsRankLargestAndPassThrough) {
  const std::size_t n = 7, f = 2, d = 12;  // k = ⌊2·2·5/7⌋ = 2
  auto rows = gaussian_rows(n, d, 6);
  for (std::size_t j = 0; j < d; ++j) rows[2 * d + j] *= 5, rows[6 * d + j] *= 3;
  auto huge = rows;
  for (std::size_t j = 0; j < d; ++j) huge[4 * d + j] = 1e30f;
  rows[4 * d + 7] = std::numeric_limits<float>::quiet_NaN();
  auto out = AdaptiveRobustClipping(AdaptiveRobustClippingOptions{f, 1}).apply(InputMatrix(rows.data(), n, d));
  auto want = AdaptiveRobustClipping(AdaptiveRobustClippingOptions{f, 1}).apply(InputMatrix(huge.data(), n, d));
  ASSERT_TRUE(out.ok() && want.ok());
  EXPECT_EQ(out->non_finite, std::vector<std::size_t>{4});
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < d; ++j) {
      if (i == 4) {
        EXPECT_EQ(std::isnan(out->output.values[i * d + j]), j == 7);
        continue;
      }
      EXPECT_EQ(out->output.values[i * d + j], want->output.values[i * d + j]) << i << "," << j;
    }
}

TEST(AdaptiveRobustClipping, PreconditionNamesTheBound) {
  const auto status = AdaptiveRobustClipping::check(4, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(status.error().message, "arc needs n >= 2f + 1 (n = 4, f = 2)");
  EXPECT_TRUE(AdaptiveRobustClipping::check(5, 2).ok());
  std::vector<float> rows(4, 1.0f);
  EXPECT_FALSE(AdaptiveRobustClipping(AdaptiveRobustClippingOptions{2, 1}).apply(InputMatrix(rows.data(), 4, 1)).ok());
}

TEST(AdaptiveRobustClipping, RegistrySpecRoundTrips) {
  auto stage = make_pre_aggregator("arc:f=2,threads=4");
  ASSERT_TRUE(stage.ok()) << stage.error().to_string();
  EXPECT_EQ((*stage)->spec(), "arc:f=2,threads=4");
  EXPECT_TRUE(make_pre_aggregator((*stage)->spec()).ok());
  auto pipeline = make_aggregator("arc:f=1 > krum:f=1");
  ASSERT_TRUE(pipeline.ok());
  EXPECT_EQ((*pipeline)->spec(), "arc:f=1 > krum:f=1");
  EXPECT_FALSE((*pipeline)->check(4).ok());
  EXPECT_TRUE((*pipeline)->check(5).ok());
  auto rule = make_aggregator("arc:f=1");
  ASSERT_FALSE(rule.ok());
  EXPECT_NE(rule.error().message.find("is a pre-aggregator"), std::string::npos);
}

}  // namespace
}  // namespace ballot::robust
