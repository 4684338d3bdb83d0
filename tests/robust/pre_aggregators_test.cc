#include "robust/pre_aggregators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

#include "robust/registry.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::gaussian_rows;

TEST(NearestNeighborMixing, MatchesBruteForce) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 4u, 9u, 20u}) {
      for (std::size_t f = 0; 2 * f + 1 <= n; f += 2) {
        const std::size_t d = 1500;  // two column blocks
        const auto rows = gaussian_rows(n, d, 60 + n + f);
        auto out = NearestNeighborMixing(NearestNeighborMixingOptions{f, 1}).apply(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(out.ok()) << out.error().to_string();
        ASSERT_EQ(out->output.n, n);
        for (std::size_t i = 0; i < n; ++i) {
          std::vector<std::size_t> order(n);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
            return testing::squared_distance(&rows[i * d], &rows[a * d], d) <
                   testing::squared_distance(&rows[i * d], &rows[b * d], d);
          });
          order.resize(n - f);
          const auto want = testing::mean_of_rows(rows, d, order);
          const std::vector<float> got(out->output.values.begin() + i * d, out->output.values.begin() + (i + 1) * d);
          testing::expect_near_vectors(got, want, 1e-5, "nnm row");
        }
      }
    }
  });
}

TEST(NearestNeighborMixing, NonFiniteInputsPassThroughUnmixed) {
  const std::size_t n = 7, f = 2, d = 10;
  auto rows = gaussian_rows(n, d, 1);
  rows[3 * d + 1] = std::numeric_limits<float>::quiet_NaN();
  auto out = NearestNeighborMixing(NearestNeighborMixingOptions{f, 1}).apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->non_finite, std::vector<std::size_t>{3});
  for (std::size_t i = 0; i < n; ++i) {
    const bool finite = std::all_of(out->output.values.begin() + i * d, out->output.values.begin() + (i + 1) * d,
                                    [](float v) { return std::isfinite(v); });
    EXPECT_EQ(finite, i != 3) << i;
  }
  EXPECT_FALSE(NearestNeighborMixing::check(4, 2).ok());
}

TEST(Bucketing, AveragesBucketsOfAPermutation) {
  const std::size_t n = 7, d = 5;
  const auto rows = gaussian_rows(n, d, 2);
  // s = 1: a permutation of the inputs.
  auto same = Bucketing(BucketingOptions{1, 42, 1}).apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(same.ok());
  std::multiset<float> in(rows.begin(), rows.end()), out(same->output.values.begin(), same->output.values.end());
  EXPECT_EQ(in, out);
  // s = 3: ⌈7/3⌉ = 3 buckets whose size-weighted sum is the total.
  Bucketing bucketing(BucketingOptions{3, 42, 1});
  EXPECT_EQ(bucketing.outputs(n), 3u);
  auto three = bucketing.apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(three.ok());
  ASSERT_EQ(three->output.n, 3u);
  for (std::size_t c = 0; c < d; ++c) {
    double total = 0, weighted = 0;
    for (std::size_t i = 0; i < n; ++i) total += rows[i * d + c];
    weighted = 3 * (three->output.values[c] + three->output.values[d + c]) + three->output.values[2 * d + c];
    EXPECT_NEAR(weighted, total, 1e-4);
  }
}

// Each bucket's value is (a·x_first + a·x_next) + … in float, a = 1/(bucket size), every product
// rounded: at every ISA level, for outputs written through the caches and streamed past them.
TEST(Bucketing, MatchesTheDocumentedArithmetic) {
  testing::for_each_isa([] {
    for (const auto& [n, s, d] : {std::tuple<std::size_t, std::size_t, std::size_t>{2, 2, 1},
                                  {7, 3, 17},
                                  {5, 2, 2049},
                                  {6, 4, 5000},
                                  {4, 2, (std::size_t{9} << 20) / 8 + 13}}) {  // a 9 MiB output: streamed
      auto rows = gaussian_rows(n, d, n + d, 1e3);
      rows[(n - 1) * d + d / 3] = std::numeric_limits<float>::infinity();
      Bucketing bucketing(BucketingOptions{s, 0, 1, /*shuffle=*/false});
      auto out = bucketing.apply(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(out.ok());
      const std::size_t buckets = (n + s - 1) / s;
      ASSERT_EQ(out->output.n, buckets);
      for (std::size_t b = 0; b < buckets; ++b) {
        const std::size_t first = b * s, last = std::min(n, first + s);
        const float a = 1.0f / static_cast<float>(last - first);
        for (std::size_t j = 0; j < d; ++j) {
          float want = a * rows[first * d + j];
          for (std::size_t k = first + 1; k < last; ++k) want += a * rows[k * d + j];
          ASSERT_EQ(std::memcmp(&want, &out->output.values[b * d + j], sizeof want), 0)
              << "n=" << n << " s=" << s << " d=" << d << " bucket " << b << " column " << j;
        }
      }
      EXPECT_EQ(out->non_finite, std::vector<std::size_t>{n - 1});
    }
  });
}

TEST(Bucketing, ReproducibleAndFreshEachCall) {
  const std::size_t n = 12, d = 3;
  const auto rows = gaussian_rows(n, d, 3);
  Bucketing a(BucketingOptions{2, 9, 1}), b(BucketingOptions{2, 9, 1});
  auto a1 = a.apply(InputMatrix(rows.data(), n, d)), b1 = b.apply(InputMatrix(rows.data(), n, d));
  auto a2 = a.apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(a1.ok() && b1.ok() && a2.ok());
  EXPECT_EQ(a1->output.values, b1->output.values);
  EXPECT_NE(a1->output.values, a2->output.values);
  EXPECT_EQ(a.calls(), 2u);
}

TEST(Bucketing, NonFiniteInputPoisonsOnlyItsBucket) {
  const std::size_t n = 8, d = 4;
  auto rows = gaussian_rows(n, d, 4);
  rows[5 * d] = std::numeric_limits<float>::infinity();
  auto out = Bucketing(BucketingOptions{2, 1, 1}).apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->non_finite, std::vector<std::size_t>{5});
  std::size_t bad = 0;
  for (std::size_t b = 0; b < out->output.n; ++b) bad += !std::isfinite(out->output.values[b * d]) ? 1 : 0;
  EXPECT_EQ(bad, 1u);
  EXPECT_FALSE(Bucketing(BucketingOptions{0, 1, 1}).check(3).ok());
}

TEST(NormClipping, ClipsOnlyLongVectors) {
  const std::size_t n = 6, d = 50;
  auto rows = gaussian_rows(n, d, 5);
  rows[2 * d + 7] = std::numeric_limits<float>::quiet_NaN();
  auto out = NormClipping(NormClippingOptions{5.0, 1}).apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->non_finite, std::vector<std::size_t>{2});
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 2) continue;
    const double before = std::sqrt(testing::squared_distance(&rows[i * d], std::vector<float>(d, 0).data(), d));
    const double after =
        std::sqrt(testing::squared_distance(&out->output.values[i * d], std::vector<float>(d, 0).data(), d));
    EXPECT_NEAR(after, std::min(before, 5.0), 1e-4);
    // Direction kept.
    for (std::size_t c = 0; c < d; ++c)
      EXPECT_NEAR(out->output.values[i * d + c], rows[i * d + c] * (after / before), 1e-5);
  }
  EXPECT_FALSE(NormClipping(NormClippingOptions{0.0, 1}).check(3).ok());
  EXPECT_FALSE(NormClipping(NormClippingOptions{INFINITY, 1}).check(3).ok());
}

// A finite row whose squares overflow float (coordinates of 1e20; d ≥ 16 takes the vector lanes):
// clipped to norm tau like any other row, not to zero; through the rule as well.
TEST(NormClipping, AFiniteRowPastTheFloatRangeIsClippedToTau) {
  testing::for_each_isa([] {
    const std::size_t n = 3, d = 32;
    std::vector<float> rows(n * d, 0.5f);
    for (std::size_t j = 0; j < d; ++j) rows[1 * d + j] = (j % 2 == 0 ? 1e20f : -1e20f);
    auto out = NormClipping(NormClippingOptions{1.0, 1}).apply(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(out->non_finite.empty());
    double squared = 0;
    for (std::size_t j = 0; j < d; ++j)
      squared += static_cast<double>(out->output.values[d + j]) * out->output.values[d + j];
    EXPECT_NEAR(std::sqrt(squared), 1.0, 1e-5);
    EXPECT_NEAR(out->output.values[d], 1.0 / std::sqrt(static_cast<double>(d)), 1e-6);
    auto scales = NormClipping(NormClippingOptions{1.0, 1}).row_scales(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(scales.ok() && scales->has_value());
    EXPECT_GT((*scales)->scales[1], 0.0f);
  });
}

// Bit-for-bit equality of two outputs (NaN payloads included).
bool same_bits(const Matrix& a, const Matrix& b) {
  return a.n == b.n && a.d == b.d &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

// Row sizes around the column blocks and norm pieces that the threads split (1024, 2048), rows
// that are split across threads (fewer rows than threads) and a non-finite row.
TEST(PreAggregators, IdenticalForAnyThreadCount) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 3u, 10u}) {
      for (std::size_t d : {1u, 1023u, 1025u, 2049u, 9000u}) {
        auto rows = gaussian_rows(n, d, n * 7 + d, 3.0);
        if (n == 10) rows[4 * d + d / 2] = std::numeric_limits<float>::quiet_NaN();
        const InputMatrix view(rows.data(), n, d);
        auto apply = [&](auto stage) {
          auto out = stage.apply(view);
          EXPECT_TRUE(out.ok());
          return std::move(out).value();
        };
        for (double tau : {1.0, 1e9}) {
          const auto one = apply(NormClipping(NormClippingOptions{tau, 1}));
          for (std::size_t threads : {2u, 3u, 16u}) {
            const auto many = apply(NormClipping(NormClippingOptions{tau, threads}));
            EXPECT_TRUE(same_bits(one.output, many.output)) << "clipping n=" << n << " d=" << d << " t=" << threads;
            EXPECT_EQ(one.non_finite, many.non_finite);
          }
        }
        for (std::size_t s : {1u, 2u, 3u}) {
          const auto one = apply(Bucketing(BucketingOptions{s, 5, 1}));
          for (std::size_t threads : {2u, 3u, 16u}) {
            const auto many = apply(Bucketing(BucketingOptions{s, 5, threads}));
            EXPECT_TRUE(same_bits(one.output, many.output)) << "bucketing n=" << n << " d=" << d << " t=" << threads;
            EXPECT_EQ(one.non_finite, many.non_finite);
          }
        }
        if (n >= 3) {
          const auto one = apply(NearestNeighborMixing(NearestNeighborMixingOptions{1, 1}));
          const auto many = apply(NearestNeighborMixing(NearestNeighborMixingOptions{1, 3}));
          EXPECT_TRUE(same_bits(one.output, many.output)) << "nnm n=" << n << " d=" << d;
        }
      }
    }
  });
}

// Above 32 rows NNM multiplies equally spaced rows in place and gathers the others into a block
// first: both give the same bits, for any thread count, with and without an unusable row.
TEST(NearestNeighborMixing, IdenticalForAnyRowLayoutAndThreadCount) {
  testing::for_each_isa([] {
    const std::size_t n = 40, d = 2500;
    for (bool poisoned : {false, true}) {
      auto rows = gaussian_rows(n, d, 11);
      if (poisoned) rows[7 * d + 3] = std::numeric_limits<float>::infinity();
      std::vector<std::vector<float>> separate(n);
      for (std::size_t i = 0; i < n; ++i) separate[i].assign(rows.begin() + i * d, rows.begin() + (i + 1) * d);
      auto listed = InputMatrix::from_rows(separate);
      ASSERT_TRUE(listed.ok());
      auto contiguous = NearestNeighborMixing(NearestNeighborMixingOptions{9, 1}).apply(InputMatrix(rows.data(), n, d));
      auto gathered = NearestNeighborMixing(NearestNeighborMixingOptions{9, 2}).apply(*listed);
      auto threaded = NearestNeighborMixing(NearestNeighborMixingOptions{9, 3}).apply(InputMatrix(rows.data(), n, d));
      ASSERT_TRUE(contiguous.ok() && gathered.ok() && threaded.ok());
      EXPECT_TRUE(same_bits(contiguous->output, gathered->output)) << poisoned;
      EXPECT_TRUE(same_bits(contiguous->output, threaded->output)) << poisoned;
      EXPECT_EQ(contiguous->non_finite, poisoned ? std::vector<std::size_t>{7} : std::vector<std::size_t>{});
    }
  });
}

// The documented arithmetic of norm clipping, at every ISA level: per block of 1024 floats,
// sixteen float lanes of rounded squares (lane l takes the floats ≡ l mod 16), then the block's
// tail in double and the lanes in order into the block's double, the blocks in order into the
// squared norm; the output is float(min(1, τ/‖x‖)) · x in float.
TEST(NormClipping, MatchesTheDocumentedArithmetic) {
  auto reference_squared_norm = [](const float* x, std::size_t len) {
    double total = 0;
    for (std::size_t begin = 0; begin < len; begin += 1024) {
      const std::size_t end = std::min(len, begin + 1024);
      float lanes[16] = {};
      std::size_t j = begin;
      for (; j + 16 <= end; j += 16) {
        for (std::size_t l = 0; l < 16; ++l) {
          volatile float square = x[j + l] * x[j + l];  // rounded: never fused into the add
          lanes[l] += square;
        }
      }
      double block = 0;
      for (; j < end; ++j) block += static_cast<double>(x[j]) * x[j];  // exact in double
      for (float lane : lanes) block += lane;
      total += block;
    }
    return total;
  };
  testing::for_each_isa([&] {
    for (std::size_t d : {5u, 1024u, 1500u, 4099u}) {
      const std::size_t n = 4;
      const auto rows = gaussian_rows(n, d, d, 2.0);
      const double tau = 30.0;
      for (std::size_t threads : {1u, 8u}) {
        auto out = NormClipping(NormClippingOptions{tau, threads}).apply(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(out.ok());
        for (std::size_t i = 0; i < n; ++i) {
          const double norm = std::sqrt(reference_squared_norm(&rows[i * d], d));
          const float scale = static_cast<float>(norm > tau ? tau / norm : 1.0);
          for (std::size_t c = 0; c < d; ++c)
            ASSERT_EQ(out->output.values[i * d + c], scale * rows[i * d + c])
                << "d=" << d << " row " << i << " col " << c;
        }
      }
    }
  });
}

TEST(Bucketing, WithoutShuffleAveragesConsecutiveInputsInTheGivenOrder) {
  const std::size_t n = 5, d = 3;
  std::vector<float> rows(n * d);
  for (std::size_t i = 0; i < n * d; ++i) rows[i] = static_cast<float>(i);
  auto stage = make_pre_aggregator("bucketing:s=2,shuffle=0");
  ASSERT_TRUE(stage.ok()) << stage.error().to_string();
  EXPECT_EQ((*stage)->spec(), "bucketing:s=2,seed=0,shuffle=0");
  auto out = (*stage)->apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->output.n, 3u);
  for (std::size_t j = 0; j < d; ++j) {
    EXPECT_FLOAT_EQ(out->output.values[j], (rows[j] + rows[d + j]) / 2);
    EXPECT_FLOAT_EQ(out->output.values[d + j], (rows[2 * d + j] + rows[3 * d + j]) / 2);
    EXPECT_FLOAT_EQ(out->output.values[2 * d + j], rows[4 * d + j]);
  }
  EXPECT_FALSE(make_pre_aggregator("bucketing:s=2,shuffle=2").ok());
}

}  // namespace
}  // namespace ballot::robust
