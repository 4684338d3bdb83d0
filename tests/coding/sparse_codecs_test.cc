#include "coding/sparse_codecs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include "codec_test_util.h"
#include "coding/detail/sparse.h"
#include "coding/wire_format.h"
#include "kernels/isa.h"

namespace ballot::coding {
namespace {

using testing::mixed_layout;
using testing::normal_values;

// Reference top-k: sort by (magnitude desc, NaN first, index asc), keep k, sort by index.
std::vector<std::uint32_t> reference_top_k(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  auto key = [&](std::uint32_t i) {
    return std::isnan(x[i]) ? std::numeric_limits<float>::infinity() : std::fabs(x[i]);
  };
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return key(a) > key(b); });
  order.resize(std::min(k, x.size()));
  std::sort(order.begin(), order.end());
  return order;
}

TEST(TopK, SelectionMatchesSortingIncludingTiesAndNan) {
  struct Case {
    std::size_t n, k;
  };
  for (const Case c : {Case{10, 3}, Case{1000, 1}, Case{1000, 999}, Case{1000, 1000}, Case{300000, 3000},
                       Case{300000, 1}, Case{200001, 150000}}) {
    auto x = normal_values(c.n, c.n + c.k);
    // Ties: quantize a third of the values to a coarse grid; and a NaN.
    for (std::size_t i = 0; i < c.n; i += 3) x[i] = std::round(x[i] * 4) / 4;
    x[c.n / 2] = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::uint32_t> got;
    detail::select_top_k(x.data(), x.size(), c.k, got);
    ASSERT_EQ(got, reference_top_k(x, c.k)) << "n=" << c.n << " k=" << c.k;
  }
}

// The candidate filter has a scalar loop and an AVX-512 one (vpcompressd): both must keep the
// same indices, in order, for every length (ragged tails past a multiple of 16 and of the
// 8192-entry block), with NaN, ±Inf, ±0 and values equal to the threshold.
TEST(TopK, EveryIsaLevelSelectsTheSameEntries) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                        std::size_t{8191}, std::size_t{8192}, std::size_t{8209}, std::size_t{70001}}) {
    auto x = normal_values(n, 7 * n + 1);
    for (std::size_t i = 0; i < n; i += 5) x[i] = std::round(x[i] * 2) / 2;  // many exactly at 0.5, 1, ...
    if (n > 3) {
      x[n - 1] = std::numeric_limits<float>::quiet_NaN();
      x[n / 2] = -std::numeric_limits<float>::infinity();
      x[n / 3] = -0.0f;
    }
    for (float threshold : {0.0f, 0.5f, 1.0f, 2.5f}) {
      std::vector<std::vector<std::uint32_t>> above;
      for (auto isa : kernels::supported_isas()) {
        kernels::ScopedIsaLimit cap(isa);
        above.emplace_back(std::vector<std::uint32_t>{42u});  // appends after what is there
        detail::select_above(x.data(), n, threshold, above.back());
        const auto k = std::max<std::size_t>(1, n / 100);
        std::vector<std::uint32_t> top;
        detail::select_top_k(x.data(), n, k, top);
        if (n > 0) {
          EXPECT_EQ(top, reference_top_k(x, k)) << kernels::isa_name(isa) << " n=" << n;
        }
      }
      std::vector<std::uint32_t> expected{42u};
      for (std::size_t i = 0; i < n; ++i) {
        if (!(std::fabs(x[i]) < threshold)) expected.push_back(static_cast<std::uint32_t>(i));
      }
      for (const auto& got : above) EXPECT_EQ(got, expected) << "n=" << n << " t=" << threshold;
    }
  }
}

// Mostly-zero vectors (the mean of a few sparse messages), with exactly m entries that are not ±0:
// fewer than k, k, a few more, k + k/10 (whose sample still puts its threshold at 0 at n = 300000),
// and enough that the sample's threshold is above 0; among them NaN, ±inf, the least subnormal
// (exactly the filter's threshold) and another subnormal; −0 among the zeros; short and long.
TEST(TopK, MostlyZeroVectorsTakeTheNonzerosThenTheLowestIndexZeros) {
  for (const std::size_t n : {std::size_t{1000}, std::size_t{300000}}) {
    const std::size_t k = n / 100;
    for (const std::size_t m : {std::size_t{0}, k / 2, k - 1, k, k + 7, k + k / 10, 3 * k, 20 * k}) {
      std::vector<std::uint32_t> positions(n);
      std::iota(positions.begin(), positions.end(), 0u);
      Rng rng(n + m);
      for (std::size_t j = 0; j + 1 < n; ++j) std::swap(positions[j], positions[j + rng.uniform_int(n - j)]);
      std::vector<float> x(n, 0.0f);
      const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                                -1e-40f};
      for (std::size_t j = 0; j < m; ++j) {
        x[positions[j]] =
            j < std::size(specials) ? specials[j] : (j % 2 == 0 ? 1.0f : -1.0f) * (rng.uniform_float() + 0.25f);
      }
      x[positions[m]] = -0.0f;
      for (auto isa : kernels::supported_isas()) {
        kernels::ScopedIsaLimit cap(isa);
        std::vector<std::uint32_t> got{5u};  // appends after what is there
        detail::select_top_k(x.data(), n, k, got);
        auto expected = reference_top_k(x, k);
        expected.insert(expected.begin(), 5u);
        ASSERT_EQ(got, expected) << kernels::isa_name(isa) << " n=" << n << " m=" << m;
        // DGC's sampled selection: when it ends exact (its threshold may be 0 here), the same top k.
        std::vector<std::uint32_t> sampled;
        Rng draw(m);
        if (detail::select_by_sampled_threshold(x.data(), n, k, n / 100, draw, sampled).exact) {
          ASSERT_EQ(sampled, reference_top_k(x, k)) << kernels::isa_name(isa) << " n=" << n << " m=" << m;
        }
      }
    }
  }
}

TEST(TopK, AllEqualMagnitudesTakeTheLowestIndices) {
  std::vector<float> x(500000, 1.0f);
  for (std::size_t i = 0; i < x.size(); i += 2) x[i] = -1.0f;
  std::vector<std::uint32_t> got;
  detail::select_top_k(x.data(), x.size(), 777, got);
  std::vector<std::uint32_t> expected(777);
  std::iota(expected.begin(), expected.end(), 0u);
  EXPECT_EQ(got, expected);
}

TEST(TopK, BudgetsSplitACountByLayerSizeAndRoundRatiosUp) {
  const auto layout = mixed_layout();  // 70, 0, 129, 64, 3
  const auto segments = segments_of(layout, Granularity::kLayer);
  const auto counts = detail::sparse_budgets(segments, 26, 0.0);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::size_t{0}), 26u);
  EXPECT_EQ(counts[1], 0u);
  // One each first (the 3-coordinate layer would get none in proportion), then 22 over what is left
  // (69, 128, 63, 2 of 262): 5.79, 10.75, 5.29, 0.17 → 5, 10, 5, 0 and the two largest remainders.
  EXPECT_EQ(counts, (std::vector<std::size_t>{7, 0, 12, 6, 1}));
  // Fewer entries than non-empty layers: in proportion only.
  EXPECT_EQ(detail::sparse_budgets(segments, 3, 0.0), (std::vector<std::size_t>{1, 0, 1, 1, 0}));
  for (std::size_t k = 1; k <= 266; ++k) {
    const auto split = detail::sparse_budgets(segments, k, 0.0);
    EXPECT_EQ(std::accumulate(split.begin(), split.end(), std::size_t{0}), k);
    for (std::size_t s = 0; s < split.size(); ++s) EXPECT_LE(split[s], segments[s].size) << k;
    if (k >= 4) {
      EXPECT_GE(split[4], 1u) << k;
    }
  }
  EXPECT_EQ(detail::sparse_budgets(segments, 0, 0.05), (std::vector<std::size_t>{4, 0, 7, 4, 1}));
  EXPECT_EQ(detail::sparse_budgets(segments, 1000, 0.0), (std::vector<std::size_t>{70, 0, 129, 64, 3}));
}

// ⌈ratio · n⌉ of the ratio as written: 0.07 · 100 is 7.000000000000001 in binary (it gave 8).
TEST(TopK, RatioBudgetsAreTheDecimalCeiling) {
  for (const auto& [hundredths, n] : std::vector<std::pair<int, std::size_t>>{
           {7, 100}, {7, 200}, {1, 100}, {30, 10}, {10, 70}, {3, 1000}, {7, 1700}}) {
    const double ratio = hundredths / 100.0;
    const std::vector<Segment> segment{{0, n}};
    EXPECT_EQ(detail::sparse_budgets(segment, 0, ratio)[0], hundredths * n / 100) << ratio << " " << n;
  }
  for (std::size_t n = 1; n <= 20000; ++n) {  // against integer arithmetic: ⌈7n/100⌉
    const std::vector<Segment> segment{{0, n}};
    ASSERT_EQ(detail::sparse_budgets(segment, 0, 0.07)[0], (7 * n + 99) / 100) << n;
  }
}

TEST(TopK, DecodesToTheSelectedValuesPerSegment) {
  const auto layout = mixed_layout();
  auto g = normal_values(layout.total_size(), 6);
  for (std::size_t i = 0; i < 70; ++i) g[i] *= 1000.0f;
  Rng rng(1);
  TopKCodec layer(SparseOptions{.k = 0, .ratio = 0.1, .granularity = Granularity::kLayer});
  TopKCodec model(SparseOptions{.k = 0, .ratio = 0.1, .granularity = Granularity::kModel});
  const auto by_layer = layer.decode(layer.encode(g, layout, rng).bytes, layout).value();
  const auto whole = model.decode(model.encode(g, layout, rng).bytes, layout).value();
  for (std::size_t l = 0; l < layout.num_layers(); ++l) {
    const auto& seg = layout.layer(l);
    std::vector<float> part(g.begin() + seg.offset, g.begin() + seg.offset + seg.size);
    const auto chosen = reference_top_k(part, static_cast<std::size_t>(std::ceil(0.1 * seg.size)));
    std::set<std::uint32_t> set(chosen.begin(), chosen.end());
    for (std::size_t i = 0; i < seg.size; ++i) {
      ASSERT_EQ(by_layer[seg.offset + i], set.count(i) ? g[seg.offset + i] : 0.0f);
    }
  }
  // Whole-model top-10% is taken entirely from the loud first layer; per layer every non-empty
  // layer gets its share.
  EXPECT_EQ(std::count_if(whole.begin() + 70, whole.end(), [](float v) { return v != 0; }), 0);
  EXPECT_GT(std::count_if(by_layer.begin() + 70, by_layer.end(), [](float v) { return v != 0; }), 0);
}

// A hand-made sparse message for `layout` (model granularity).
std::vector<std::uint8_t> sparse_message(const GradientLayout& layout, std::vector<std::uint32_t> idx) {
  std::vector<std::size_t> counts{idx.size()};
  std::vector<float> values(idx.size(), 1.0f);
  return detail::write_sparse(CodecId::kTopK, Granularity::kModel, 0, layout, counts, idx, values).bytes;
}

TEST(TopK, DecodeRejectsBadIndicesAndCounts) {
  const auto layout = GradientLayout::whole(100);
  TopKCodec codec;
  std::vector<float> acc(100, 0.0f);
  EXPECT_TRUE(codec.decode_add(sparse_message(layout, {1, 5, 99}), layout, acc).ok());
  EXPECT_FALSE(codec.decode_add(sparse_message(layout, {1, 5, 100}), layout, acc).ok());
  EXPECT_FALSE(codec.decode_add(sparse_message(layout, {0xFFFFFFFFu}), layout, acc).ok());
  EXPECT_FALSE(codec.decode_add(sparse_message(layout, {5, 5}), layout, acc).ok());
  EXPECT_FALSE(codec.decode_add(sparse_message(layout, {6, 5}), layout, acc).ok());
  auto huge = sparse_message(layout, {1});
  const std::uint32_t count = 101;  // more entries than coordinates
  std::memcpy(huge.data() + kHeaderBytes, &count, 4);
  EXPECT_FALSE(codec.decode_add(huge, layout, acc).ok());
  const std::uint32_t lie = 2;  // a count that does not match the bytes
  std::memcpy(huge.data() + kHeaderBytes, &lie, 4);
  EXPECT_FALSE(codec.decode_add(huge, layout, acc).ok());
  std::vector<float> expected(100, 0.0f);
  expected[1] = expected[5] = expected[99] = 1.0f;
  EXPECT_EQ(acc, expected);  // only the valid message was applied
}

TEST(RandomK, KeepsExactlyKScaledCoordinatesAndTheSizeIsExact) {
  const auto layout = GradientLayout::whole(1000);
  const auto g = normal_values(1000, 7);
  RandomKCodec codec(SparseOptions{.k = 50});
  Rng rng(3, 4);
  const auto encoded = codec.encode(g, layout, rng);
  EXPECT_EQ(encoded.size(), 24u + 4u + 24u + 4u * 50u);
  const auto decoded = codec.decode(encoded.bytes, layout).value();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (decoded[i] != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(decoded[i], 20.0f * g[i]);
    }
  }
  EXPECT_EQ(kept, 50u);
}

TEST(RandomK, SubsetsAreDistinctAndUniform) {
  // Each of n = 20 indices is drawn with probability k/n = 0.25 per subset.
  constexpr int kTrials = 40000;
  std::vector<int> hits(20, 0);
  Rng rng(12);
  for (int t = 0; t < kTrials; ++t) {
    std::vector<std::uint32_t> subset;
    random_subset(rng, 20, 5, subset);
    ASSERT_EQ(std::set<std::uint32_t>(subset.begin(), subset.end()).size(), 5u);
    for (auto i : subset) ++hits[i];
  }
  // Binomial(40000, 0.25): σ ≈ 86.6; 5σ tolerance.
  for (int h : hits) EXPECT_NEAR(h, kTrials * 0.25, 5 * 86.6);
}

TEST(RandomK, IsUnbiased) {
  // E[decode] = g. Per coordinate the estimator is (n/k) g_i with probability k/n, else 0:
  // variance g_i² (n/k - 1). Tolerance: 5 standard errors of the mean over T trials.
  const auto layout = GradientLayout::from_sizes({{"a", 24}, {"b", 40}}).value();
  const auto g = normal_values(layout.total_size(), 8);
  RandomKCodec codec(SparseOptions{.k = 0, .ratio = 0.25, .granularity = Granularity::kLayer});
  constexpr int kTrials = 20000;
  std::vector<double> sum(g.size(), 0.0);
  std::vector<float> acc(g.size());
  for (int t = 0; t < kTrials; ++t) {
    Rng rng(2024, static_cast<std::uint64_t>(t));
    std::fill(acc.begin(), acc.end(), 0.0f);
    ASSERT_TRUE(codec.decode_add(codec.encode(g, layout, rng).bytes, layout, acc).ok());
    for (std::size_t i = 0; i < g.size(); ++i) sum[i] += acc[i];
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double sigma = std::fabs(g[i]) * std::sqrt(4.0 - 1.0);
    EXPECT_NEAR(sum[i] / kTrials, g[i], 5 * sigma / std::sqrt(kTrials) + 1e-6) << i;
  }
}

// A count split over layers gives each layer at least one entry when it can, so random-k stays
// unbiased on a small layer: layers of 10, 10 and 1 with k = 4 (in proportion only, the last
// layer got none and decoded to 0 every time).
TEST(RandomK, ACountOverLayersIsUnbiasedOnASmallLayer) {
  const auto layout = GradientLayout::from_sizes({{"a", 10}, {"b", 10}, {"c", 1}}).value();
  std::vector<float> g(21);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i + 1);
  RandomKCodec codec(SparseOptions{.k = 4, .ratio = 0.0, .granularity = Granularity::kLayer});
  constexpr int kTrials = 20000;
  std::vector<double> sum(g.size(), 0.0);
  std::vector<float> acc(g.size());
  for (int t = 0; t < kTrials; ++t) {
    Rng rng(77, static_cast<std::uint64_t>(t));
    std::fill(acc.begin(), acc.end(), 0.0f);
    ASSERT_TRUE(codec.decode_add(codec.encode(g, layout, rng).bytes, layout, acc).ok());
    EXPECT_EQ(acc[20], 21.0f);  // its layer's one entry, scaled by 1/1
    for (std::size_t i = 0; i < g.size(); ++i) sum[i] += acc[i];
  }
  for (std::size_t i = 0; i < 20; ++i) {
    // Two of ten coordinates of each large layer sent, scaled by 5: variance g_i² (5 − 1).
    const double sigma = std::fabs(g[i]) * 2.0;
    EXPECT_NEAR(sum[i] / kTrials, g[i], 5 * sigma / std::sqrt(kTrials)) << i;
  }
}

TEST(Threshold, KeepsExactlyTheLargeEntries) {
  const auto layout = GradientLayout::whole(5000);
  const auto g = normal_values(5000, 9);
  ThresholdCodec codec(ThresholdOptions{1.5f});
  Rng rng(1);
  const auto encoded = codec.encode(g, layout, rng);
  const auto decoded = codec.decode(encoded.bytes, layout).value();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool big = std::fabs(g[i]) >= 1.5f;
    kept += big;
    ASSERT_EQ(decoded[i], big ? g[i] : 0.0f);
  }
  EXPECT_EQ(encoded.size(), 24 + 4 + 8 * kept);
  EXPECT_LE(encoded.size(), codec.wire_size(layout));
}

}  // namespace
}  // namespace ballot::coding
