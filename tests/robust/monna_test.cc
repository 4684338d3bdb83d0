#include "robust/monna.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "robust/pre_aggregators.h"
#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

// Pivot (0, 0); the others at squared distances 1, 9 and 200: with f = 1 the three nearest,
// the pivot included, average to (1/3, 1).
TEST(Monna, HandComputed) {
  const std::vector<float> rows{0, 0, 1, 0, 0, 3, 10, 10};
  auto result = Monna(MonnaOptions{1, 0, 1}).aggregate(InputMatrix(rows.data(), 4, 2));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_NEAR(result->value[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(result->value[1], 1.0, 1e-7);
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(result->report.excluded, std::vector<std::size_t>{3});
  EXPECT_EQ(result->report.scores, (std::vector<double>{0, 1, 9, 200}));
  // Around input 3 the nearest are 3, 2 (distance 149) and 1 (181).
  auto far = Monna(MonnaOptions{1, 3, 1}).aggregate(InputMatrix(rows.data(), 4, 2));
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->report.selected, (std::vector<std::size_t>{1, 2, 3}));
}

// ByzFL's documented example (MoNNA(f=1, idx=1) on three collinear points): inputs 0 and 2 are
// equally far from the pivot; the tie goes to the lower index, which is also the answer ByzFL
// documents.
TEST(Monna, TieGoesToTheLowerIndex) {
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto result = Monna(MonnaOptions{1, 1, 1}).aggregate(InputMatrix(rows.data(), 3, 3));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->value, (std::vector<float>{2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1}));
}

// Equal inputs are all at distance 0 from the pivot: the pivot stays among its neighbours.
TEST(Monna, ThePivotIsItsOwnNeighbourWhateverTies) {
  const std::vector<float> rows(3 * 4, 0.0f);
  auto result = Monna(MonnaOptions{1, 2, 1}).aggregate(InputMatrix(rows.data(), 3, 4));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 2}));
}

// Inputs 10^4 from the origin with a spread of 1 (d = 1024): ‖x‖² + ‖y‖² − 2⟨x, y⟩ loses the
// distances (about 2d against norms of 10^11); the direct sum keeps them, so the neighbours are the
// two inputs of spread 1, not those of spread 1.5.
TEST(Monna, DistancesFarFromTheOriginKeepTheNearestNeighbours) {
  testing::for_each_isa([] {
    const std::size_t n = 5, d = 1024;
    auto rows = gaussian_rows(n, d, 17);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < d; ++j) rows[i * d + j] = 1e4f + (i >= 3 ? 1.5f : 1.0f) * rows[i * d + j];
    auto result = Monna(MonnaOptions{2, 0, 1}).aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 1, 2}));
  });
}

TEST(Monna, IsTheRowOfNearestNeighbourMixingAtThePivot) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 5u, 10u}) {
      for (std::size_t f = 0; 2 * f + 1 <= n; ++f) {
        const std::size_t d = 700;
        const auto rows = gaussian_rows(n, d, 90 + n + f);
        auto mixed = NearestNeighborMixing(NearestNeighborMixingOptions{f, 1}).apply(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(mixed.ok());
        for (std::size_t p = 0; p < n; ++p) {
          auto result = Monna(MonnaOptions{f, p, 1}).aggregate(InputMatrix(rows.data(), n, d));
          ASSERT_TRUE(result.ok()) << result.error().to_string();
          // Brute force: exact distances, stable order.
          std::vector<std::size_t> order(n);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
            return testing::squared_distance(&rows[p * d], &rows[a * d], d) <
                   testing::squared_distance(&rows[p * d], &rows[b * d], d);
          });
          order.resize(n - f);
          std::sort(order.begin(), order.end());
          EXPECT_EQ(result->report.selected, order) << "n=" << n << " f=" << f << " p=" << p;
          const std::vector<float> row(mixed->output.values.begin() + p * d,
                                       mixed->output.values.begin() + (p + 1) * d);
          testing::expect_near_vectors(result->value, row, 1e-5, "nnm row");
          testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, order), 1e-5, "brute");
        }
      }
    }
  });
}

TEST(Monna, ByzantineInputsMoveTheMeanButNotMonnaAroundAnHonestPivot) {
  const std::size_t n = 7, f = 2, d = 25;
  auto rows = gaussian_rows(n, d, 12);
  for (std::size_t j = 0; j < d; ++j) rows[2 * d + j] = 1e6f, rows[5 * d + j] = 1e6f;
  auto result = Monna(MonnaOptions{f, 0, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  const std::vector<std::size_t> honest{0, 1, 3, 4, 6};
  EXPECT_EQ(result->report.selected, honest);
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, honest), 1e-6);
  const auto mean = testing::mean_of_rows(rows, d, {0, 1, 2, 3, 4, 5, 6});
  EXPECT_GT(mean[0], 1e5f);
}

TEST(Monna, PreconditionsNameTheBound) {
  const auto status = Monna::check(4, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(status.error().message, "monna needs n >= 2f + 1 (n = 4, f = 2)");
  const auto pivot = Monna(MonnaOptions{1, 5, 1}).check(5);
  ASSERT_FALSE(pivot.ok());
  EXPECT_EQ(pivot.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(pivot.error().message, "monna needs pivot < n (n = 5, pivot = 5)");
  EXPECT_TRUE(Monna(MonnaOptions{1, 4, 1}).check(5).ok());
}

TEST(Monna, NonFiniteInputsAreNeverNeighboursAndANonFinitePivotIsRefused) {
  const std::size_t n = 5, d = 4;
  auto rows = gaussian_rows(n, d, 5);
  rows[1 * d + 2] = std::numeric_limits<float>::quiet_NaN();
  rows[3 * d + 0] = std::numeric_limits<float>::infinity();
  auto result = Monna(MonnaOptions{1, 0, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{1, 3}));
  // Two non-finite inputs > f = 1: the three finite ones are all kept.
  EXPECT_EQ(result->report.selected, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_TRUE(std::isinf(result->report.scores[1]) && std::isinf(result->report.scores[3]));
  testing::expect_near_vectors(result->value, testing::mean_of_rows(rows, d, {0, 2, 4}), 1e-6);
  auto refused = Monna(MonnaOptions{1, 1, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPrecondition);
  EXPECT_NE(refused.error().message.find("pivot (input 1)"), std::string::npos) << refused.error().message;
}

TEST(Monna, RegistrySpecRoundTrips) {
  auto rule = make_aggregator("monna:pivot=3,f=1");
  ASSERT_TRUE(rule.ok()) << rule.error().to_string();
  EXPECT_EQ((*rule)->spec(), "monna:f=1,pivot=3");
  auto again = make_aggregator((*rule)->spec() + ",threads=2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->spec(), "monna:f=1,pivot=3,threads=2");
  EXPECT_FALSE((*rule)->check(3).ok());  // pivot 3 needs n ≥ 4
  EXPECT_FALSE(make_aggregator("monna:pivot=-1").ok());
}

}  // namespace
}  // namespace ballot::robust
