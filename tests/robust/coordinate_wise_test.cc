#include "robust/coordinate_wise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "robust/detail/common.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

using testing::column;
using testing::for_each_isa;
using testing::gaussian_rows;

enum class Kind { kMean, kMedian, kTrimmed, kMeaMed };

std::unique_ptr<Aggregator> make(Kind kind, std::size_t f, std::size_t threads = 1) {
  switch (kind) {
    case Kind::kMean:
      return std::make_unique<Mean>(MeanOptions{threads});
    case Kind::kMedian:
      return std::make_unique<CoordinateMedian>(MedianOptions{f, threads});
    case Kind::kTrimmed:
      return std::make_unique<TrimmedMean>(TrimmedMeanOptions{f, threads});
    case Kind::kMeaMed:
      return std::make_unique<MeanAroundMedian>(MeanAroundMedianOptions{f, threads});
  }
  return nullptr;
}

// Reference for one coordinate: full sort, then the textbook definition.
double reference(Kind kind, std::vector<float> v, std::size_t f) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size();
  auto mean = [&](std::size_t lo, std::size_t hi) {
    double s = 0;
    for (std::size_t i = lo; i < hi; ++i) s += v[i];
    return s / static_cast<double>(hi - lo);
  };
  switch (kind) {
    case Kind::kMean:
      return mean(0, m);
    case Kind::kMedian:
      return 0.5 * (static_cast<double>(v[(m - 1) / 2]) + v[m / 2]);
    case Kind::kTrimmed:
      return mean(f, m - f);
    case Kind::kMeaMed: {
      // The m − f values closest to the median, chosen one by one (two pointers from the median).
      const double med = 0.5 * (static_cast<double>(v[(m - 1) / 2]) + v[m / 2]);
      std::vector<double> by_distance(v.begin(), v.end());
      std::stable_sort(by_distance.begin(), by_distance.end(),
                       [med](double a, double b) { return std::abs(a - med) < std::abs(b - med); });
      double s = 0;
      for (std::size_t i = 0; i < m - f; ++i) s += by_distance[i];
      return s / static_cast<double>(m - f);
    }
  }
  return 0;
}

struct Case {
  Kind kind;
  const char* name;
};
const Case kKinds[] = {
    {Kind::kMean, "mean"}, {Kind::kMedian, "median"}, {Kind::kTrimmed, "trimmed_mean"}, {Kind::kMeaMed, "meamed"}};

class CoordinateRule : public ::testing::TestWithParam<Case> {
 protected:
  Kind kind() const { return GetParam().kind; }
  std::size_t max_f(std::size_t n) const { return kind() == Kind::kMean ? 0 : (n - 1) / 2; }
};

// Sizes around the tile width, the network limit (128) and the nth_element path beyond it.
TEST_P(CoordinateRule, MatchesBruteForce) {
  for_each_isa([&] {
    for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 8u, 10u, 25u, 64u, 100u, 128u, 129u, 150u}) {
      const std::size_t d = n > 64 ? 70 : 131;
      const auto rows = gaussian_rows(n, d, 100 + n);
      for (std::size_t f : {std::size_t{0}, std::size_t{1}, max_f(n) / 2, max_f(n)}) {
        if (f > max_f(n)) continue;
        auto rule = make(kind(), f);
        auto result = rule->aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        ASSERT_EQ(result->value.size(), d);
        for (std::size_t c = 0; c < d; ++c) {
          const double want = reference(kind(), column(rows, n, d, c), f);
          ASSERT_NEAR(result->value[c], want, 1e-5 * (1 + std::abs(want))) << "n=" << n << " f=" << f << " c=" << c;
        }
      }
    }
  });
}

// Integer data (ties in value and in distance to the median everywhere), exact in float and double:
// the definition (lower value first on a tie in distance) at sizes on both sides of 128, where the
// sorting network's window scan and the nth_element path take over from each other.
TEST_P(CoordinateRule, MatchesBruteForceOnTiedIntegers) {
  for_each_isa([&] {
    for (std::size_t n : {3u, 5u, 7u, 16u, 20u, 33u, 127u, 128u, 129u, 150u}) {
      const std::size_t d = 70;
      Rng rng(500 + n);
      std::vector<float> rows(n * d);
      for (auto& v : rows) v = static_cast<float>(rng.uniform_int(5));
      for (std::size_t f : {std::size_t{1}, max_f(n) / 2, max_f(n)}) {
        if (f > max_f(n) || (kind() == Kind::kMean && f != 0)) continue;
        auto result = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        for (std::size_t c = 0; c < d; ++c) {
          const double want = reference(kind(), column(rows, n, d, c), f);
          ASSERT_NEAR(result->value[c], want, 1e-6 * (1 + std::abs(want))) << "n=" << n << " f=" << f << " c=" << c;
        }
      }
    }
  });
}

TEST_P(CoordinateRule, SeveralColumnBlocksAndListOfSpans) {
  const std::size_t n = 9, d = 5000, f = kind() == Kind::kMean ? 0 : 3;
  const auto rows = gaussian_rows(n, d, 7);
  std::vector<std::vector<float>> list;
  for (std::size_t i = 0; i < n; ++i) list.emplace_back(rows.begin() + i * d, rows.begin() + (i + 1) * d);
  auto view = InputMatrix::from_rows(list);
  ASSERT_TRUE(view.ok());
  auto a = make(kind(), f)->aggregate(*view);
  auto b = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->value, b->value);
  for (std::size_t c = 0; c < d; c += 97) ASSERT_NEAR(a->value[c], reference(kind(), column(rows, n, d, c), f), 1e-5);
}

TEST_P(CoordinateRule, IdenticalAcrossRunsAndThreadCounts) {
  const std::size_t n = 11, d = 20000, f = kind() == Kind::kMean ? 0 : 2;
  const auto rows = gaussian_rows(n, d, 3);
  const InputMatrix view(rows.data(), n, d);
  auto one = make(kind(), f, 1)->aggregate(view);
  auto again = make(kind(), f, 1)->aggregate(view);
  auto three = make(kind(), f, 3)->aggregate(view);
  ASSERT_TRUE(one.ok() && again.ok() && three.ok());
  EXPECT_EQ(one->value, again->value);
  EXPECT_EQ(one->value, three->value);
}

TEST_P(CoordinateRule, PermutationInvariant) {
  const std::size_t n = 13, d = 300, f = kind() == Kind::kMean ? 0 : 4;
  auto rows = gaussian_rows(n, d, 5);
  auto before = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(9);
  rng.shuffle(std::span<std::size_t>(perm));
  std::vector<float> shuffled(n * d);
  for (std::size_t i = 0; i < n; ++i) std::copy_n(rows.begin() + perm[i] * d, d, shuffled.begin() + i * d);
  auto after = make(kind(), f)->aggregate(InputMatrix(shuffled.data(), n, d));
  ASSERT_TRUE(before.ok() && after.ok());
  if (kind() == Kind::kMean) {
    testing::expect_near_vectors(after->value, before->value, 1e-6);
  } else {
    EXPECT_EQ(after->value, before->value);  // sums of sorted values: bit-identical
  }
}

TEST_P(CoordinateRule, NonFiniteInputsAreExcludedAndNamed) {
  for_each_isa([&] {
    const std::size_t n = 9, d = 200;
    const std::size_t f = kind() == Kind::kMean ? 0 : 3;
    auto rows = gaussian_rows(n, d, 11);
    rows[2 * d + 150] = std::numeric_limits<float>::quiet_NaN();
    rows[6 * d + 0] = std::numeric_limits<float>::infinity();
    rows[7 * d + 199] = -std::numeric_limits<float>::infinity();
    auto result = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{2, 6, 7}));
    const std::vector<std::size_t> finite{0, 1, 3, 4, 5, 8};
    const std::size_t f_left = f - std::min<std::size_t>(f, 3);
    for (std::size_t c = 0; c < d; ++c) {
      std::vector<float> v;
      for (std::size_t i : finite) v.push_back(rows[i * d + c]);
      ASSERT_TRUE(std::isfinite(result->value[c]));
      ASSERT_NEAR(result->value[c], reference(kind(), v, f_left), 1e-5) << c;
    }
  });
}

// With a selection network (every rule here but the mean), whole column blocks take the fused
// path (groups of up to 16 rows gathered and sorted in one pass) and the last, partial block the
// copy path: both against the reference, with non-finite values found by the fused kernel alone
// (in a full and in a partial group of a whole block) and by the copy path (partial block).
TEST_P(CoordinateRule, FusedGroupsOverWholeBlocksAndThePartialOne) {
  if (kind() == Kind::kMean) GTEST_SKIP() << "the mean has no network: always the copy path";
  for_each_isa([&] {
    for (std::size_t n : {7u, 16u, 40u}) {  // one partial group; one whole group; two and a partial one
      const std::size_t d = 5000;  // whole blocks of 2048 (n = 7, 16) or 768 (n = 40) columns, then a partial one
      const std::size_t f = n / 4;
      enum class Poison { kNone, kFusedFullGroup, kFusedPartialGroup, kBoth };
      for (const Poison poison : {Poison::kNone, Poison::kFusedFullGroup, Poison::kFusedPartialGroup, Poison::kBoth}) {
        const bool poisoned = poison != Poison::kNone;
        auto rows = gaussian_rows(n, d, 21 + n);
        std::vector<std::size_t> bad;
        if (poison == Poison::kFusedFullGroup && n >= 16) {
          rows[3 * d + 800] = std::numeric_limits<float>::quiet_NaN();  // rows 0..15: a full group, whole block
          bad = {3};
        } else if (poison == Poison::kFusedPartialGroup && n % 16 != 0) {
          rows[(n - 1) * d + 800] = -std::numeric_limits<float>::infinity();  // the last, partial group
          bad = {n - 1};
        } else if (poison == Poison::kBoth) {
          rows[(n / 2) * d + 800] = std::numeric_limits<float>::quiet_NaN();    // a fused group, whole block
          rows[(n - 1) * d + d - 10] = std::numeric_limits<float>::infinity();  // last row, partial block
          bad = {n / 2, n - 1};
        } else if (poisoned) {
          continue;  // no such group at this n
        }
        auto result = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
        ASSERT_TRUE(result.ok()) << result.error().to_string();
        EXPECT_EQ(result->report.non_finite, bad);
        for (std::size_t c = 0; c < d; ++c) {
          std::vector<float> v;
          for (std::size_t i = 0; i < n; ++i)
            if (std::find(bad.begin(), bad.end(), i) == bad.end()) v.push_back(rows[i * d + c]);
          const std::size_t f_left = f - std::min(f, bad.size());
          const double want = reference(kind(), v, f_left);
          ASSERT_TRUE(std::isfinite(result->value[c]));
          ASSERT_NEAR(result->value[c], want, 1e-5 * (1 + std::abs(want)))
              << "n=" << n << " poison=" << static_cast<int>(poison) << " c=" << c;
        }
      }
    }
  });
}

TEST_P(CoordinateRule, AllInputsNonFiniteIsAnErrorNotACrash) {
  std::vector<float> rows(3 * 10, std::numeric_limits<float>::quiet_NaN());
  auto result = make(kind(), 0)->aggregate(InputMatrix(rows.data(), 3, 10));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
}

TEST_P(CoordinateRule, StaysWithinHonestRangeUnderAttack) {
  if (kind() == Kind::kMean) GTEST_SKIP() << "the mean is the undefended baseline";
  const std::size_t n = 15, f = 7, d = 257;
  for (float attack : {1e30f, -1e30f, 3.0e38f}) {
    auto rows = gaussian_rows(n, d, 21);
    for (std::size_t i = 0; i < f; ++i)  // f colluding attackers, alternating extremes
      for (std::size_t c = 0; c < d; ++c) rows[i * d + c] = (i % 2 == 0 || c % 3 == 0) ? attack : -attack;
    auto result = make(kind(), f)->aggregate(InputMatrix(rows.data(), n, d));
    ASSERT_TRUE(result.ok());
    for (std::size_t c = 0; c < d; ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (std::size_t i = f; i < n; ++i) lo = std::min(lo, rows[i * d + c]), hi = std::max(hi, rows[i * d + c]);
      ASSERT_GE(result->value[c], lo) << c;
      ASSERT_LE(result->value[c], hi) << c;
    }
  }
}

TEST_P(CoordinateRule, PreconditionAtItsEdge) {
  if (kind() == Kind::kMean) {
    EXPECT_FALSE(Mean::check(0, 0).ok());
    EXPECT_TRUE(Mean::check(1, 0).ok());
    return;
  }
  for (std::size_t f : {1u, 2u, 5u}) {
    auto rule = make(kind(), f);
    const auto below = rule->check(2 * f);
    ASSERT_FALSE(below.ok());
    EXPECT_EQ(below.error().code, ErrorCode::kPrecondition);
    EXPECT_NE(below.error().message.find("2f + 1"), std::string::npos) << below.error().message;
    EXPECT_TRUE(rule->check(2 * f + 1).ok());
    std::vector<float> rows(2 * f * 4, 1.0f);
    EXPECT_FALSE(rule->aggregate(InputMatrix(rows.data(), 2 * f, 4)).ok());
  }
}

TEST_P(CoordinateRule, EmptyVectorsAndNoInputs) {
  auto rule = make(kind(), 0);
  EXPECT_FALSE(rule->aggregate(InputMatrix()).ok());
  std::vector<float> none;
  auto result = rule->aggregate(InputMatrix(none.data(), 3, 0));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->value.empty());
}

INSTANTIATE_TEST_SUITE_P(Rules, CoordinateRule, ::testing::ValuesIn(kKinds),
                         [](const auto& info) { return std::string(info.param.name); });

// The 0-1 principle: a comparator network sorts every input iff it sorts every 0/1 input. The
// pruned networks must place the needed ranks correctly for all 2^m binary inputs.
TEST(SelectionNetwork, ZeroOnePrincipleForEveryRankRange) {
  for (std::size_t m = 1; m <= 12; ++m) {
    for (std::size_t lo = 0; lo < m; ++lo) {
      for (std::size_t hi : {lo + 1, m}) {
        const auto net = detail::selection_network(m, lo, hi);
        for (std::uint32_t bits = 0; bits < (1u << m); ++bits) {
          std::vector<int> v(m);
          for (std::size_t w = 0; w < m; ++w) v[w] = (bits >> w) & 1;
          for (const auto& c : net)
            if (v[c.hi] < v[c.lo]) std::swap(v[c.lo], v[c.hi]);
          const int zeros = static_cast<int>(m) - __builtin_popcount(bits);
          for (std::size_t r = lo; r < hi; ++r)
            ASSERT_EQ(v[r], static_cast<int>(r) >= zeros ? 1 : 0) << "m=" << m << " ranks " << lo << ".." << hi;
        }
      }
    }
  }
}

TEST(SelectionNetwork, PruningDropsComparatorsForAMedian) {
  EXPECT_LT(detail::selection_network(100, 49, 51).size(), detail::selection_network(100, 0, 100).size());
}

// The engine's plan (groups of 16 wires sorted in registers, then the rest of the pruned network)
// must leave exactly the values of the pruned network on the needed ranks, bit for bit — the
// needed ranks of any comparator network are the same set of values, but which of two equal
// values (−0 and +0) lands on a rank is up to the comparators. Checked on every ISA level, with
// ties, signed zeros and partial tiles.
TEST(SelectionNetwork, RegisterSortedPlanMatchesThePrunedNetwork) {
  for_each_isa([] {
    const auto& kern = detail::isa_kernels();
    Rng rng(17);
    for (std::size_t m :
         {1u, 2u, 3u, 5u, 7u, 8u, 9u, 10u, 15u, 16u, 17u, 31u, 32u, 33u, 48u, 52u, 64u, 76u, 100u, 127u, 128u}) {
      const std::size_t mid = (m - 1) / 2;
      const std::pair<std::size_t, std::size_t> ranges[] = {
          {mid, m / 2 + 1}, {m / 4, m - m / 4}, {0, m}, {mid - m / 8, std::min(mid + 3, m)}};
      for (const auto& [lo, hi] : ranges) {
        for (std::size_t width : {detail::kTile, std::size_t{23}}) {
          std::vector<float> tile(m * detail::kTile);
          for (auto& v : tile) {
            const auto draw = rng.uniform_int(8);
            v = draw == 0 ? 0.0f : draw == 1 ? -0.0f : static_cast<float>(rng.uniform_int(5)) - 2.0f;
          }
          std::vector<float> want = tile;
          for (const auto& c : detail::selection_network(m, lo, hi))
            for (std::size_t j = 0; j < width; ++j) {
              float& a = want[c.lo * detail::kTile + j];
              float& b = want[c.hi * detail::kTile + j];
              const float x = a, y = b;
              a = y < x ? y : x;
              b = y < x ? x : y;
            }
          const auto plan = detail::selection_plan(m, lo, hi);
          EXPECT_EQ(plan.sorted_wires, m);
          kern.sort_groups16(tile.data(), detail::kTile, width, plan.sorted_wires);
          kern.network(tile.data(), detail::kTile, width, plan.comparators.data(), plan.comparators.size());
          for (std::size_t r = lo; r < hi; ++r)
            for (std::size_t j = 0; j < width; ++j) {
              std::uint32_t got_bits, want_bits;
              std::memcpy(&got_bits, &tile[r * detail::kTile + j], 4);
              std::memcpy(&want_bits, &want[r * detail::kTile + j], 4);
              ASSERT_EQ(got_bits, want_bits)
                  << "m=" << m << " ranks " << lo << ".." << hi << " rank " << r << " column " << j;
            }
        }
      }
    }
  });
}

// The fused kernel leaves exactly what the copy and the in-place sort leave (bit for bit, ties and
// signed zeros included) and flags non-finite inputs, on every ISA level.
TEST(SelectionNetwork, GatherSortEqualsCopyThenSort) {
  for_each_isa([] {
    const auto& kern = detail::isa_kernels();
    const std::size_t width = 3 * detail::kTile, rows = 16, stride = width + 40;
    const std::size_t tile_floats = rows * detail::kTile;
    Rng rng(5);
    std::vector<float> source(rows * stride);
    for (auto& v : source) {
      const auto draw = rng.uniform_int(6);
      v = draw == 0 ? 0.0f : draw == 1 ? -0.0f : static_cast<float>(rng.uniform_int(7)) - 3.0f;
    }
    const float* src[16];
    for (std::size_t r = 0; r < rows; ++r) src[r] = source.data() + r * stride;
    std::vector<float> want(3 * tile_floats), got(3 * tile_floats);
    for (std::size_t r = 0; r < rows; ++r)
      ASSERT_TRUE(kern.copy_finite_tiled(src[r], width, want.data() + r * detail::kTile, tile_floats, nullptr, 0));
    for (std::size_t t = 0; t < 3; ++t)
      kern.sort_groups16(want.data() + t * tile_floats, detail::kTile, detail::kTile, 16);
    ASSERT_TRUE(kern.gather_sort_groups16(src, 16, width, got.data(), tile_floats, 40));
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
    // A partial group (padded with +∞ in registers): its rows only, sorted, the wires above untouched.
    for (const std::size_t rows_in : {std::size_t{1}, std::size_t{7}, std::size_t{15}}) {
      std::vector<float> partial_want(3 * tile_floats, 42.0f), partial_got(3 * tile_floats, 42.0f);
      for (std::size_t r = 0; r < rows_in; ++r)
        ASSERT_TRUE(
            kern.copy_finite_tiled(src[r], width, partial_want.data() + r * detail::kTile, tile_floats, nullptr, 0));
      for (std::size_t t = 0; t < 3; ++t)
        kern.sort_groups16(partial_want.data() + t * tile_floats, detail::kTile, detail::kTile, rows_in);
      ASSERT_TRUE(kern.gather_sort_groups16(src, rows_in, width, partial_got.data(), tile_floats, 0));
      ASSERT_EQ(std::memcmp(partial_want.data(), partial_got.data(), partial_want.size() * sizeof(float)), 0)
          << rows_in;
      for (std::size_t t = 0; t < 3; ++t)
        for (std::size_t j = 0; j < detail::kTile; ++j) {
          std::vector<float> column_values;
          for (std::size_t r = 0; r < rows_in; ++r) column_values.push_back(src[r][t * detail::kTile + j]);
          std::sort(column_values.begin(), column_values.end());
          for (std::size_t r = 0; r < rows_in; ++r)
            ASSERT_EQ(partial_got[t * tile_floats + r * detail::kTile + j], column_values[r]);
          ASSERT_EQ(partial_got[t * tile_floats + rows_in * detail::kTile + j], 42.0f);
        }
    }
    for (const float poison : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      auto copy = source;
      copy[11 * stride + width - 1] = poison;
      const float* poisoned[16];
      for (std::size_t r = 0; r < rows; ++r) poisoned[r] = copy.data() + r * stride;
      EXPECT_FALSE(kern.gather_sort_groups16(poisoned, 16, width, got.data(), tile_floats, 0));
      EXPECT_TRUE(kern.gather_sort_groups16(poisoned, 11, width, got.data(), tile_floats, 0));   // row 11 not read
      EXPECT_FALSE(kern.gather_sort_groups16(poisoned, 12, width, got.data(), tile_floats, 0));  // partial group
      for (const std::size_t rows_in : {std::size_t{1}, std::size_t{7}}) {
        auto first_column = source;
        first_column[(rows_in - 1) * stride] = poison;
        const float* partial[16];
        for (std::size_t r = 0; r < rows; ++r) partial[r] = first_column.data() + r * stride;
        EXPECT_FALSE(kern.gather_sort_groups16(partial, rows_in, width, got.data(), tile_floats, 0)) << rows_in;
      }
    }
  });
}

// {0, 0, 2, 2, 3}, f = 1: the median is 2 and the four closest values are 2, 2, 3 and one 0
// (distance 1 beats 2): 1.75. The window that keeps both 0s and drops 3 has the same largest
// distance (2) and gave 1.0. Tiled to 64 coordinates for the vector path.
TEST(MeaMed, KeepsTheClosestValuesWhenWindowsTie) {
  for_each_isa([] {
    for (const std::size_t d : {std::size_t{1}, std::size_t{64}}) {
      std::vector<float> rows;
      for (const float v : {0.0f, 0.0f, 2.0f, 2.0f, 3.0f}) rows.insert(rows.end(), d, v);
      auto result = MeanAroundMedian(MeanAroundMedianOptions{1, 1}).aggregate(InputMatrix(rows.data(), 5, d));
      ASSERT_TRUE(result.ok());
      for (const float v : result->value) EXPECT_EQ(v, 1.75f) << "d=" << d;
    }
  });
}

// The closest-window reduction scans only window starts near the middle; on integer data (ties in
// value and in distance everywhere) it must still take the w values closest to the median, the
// lower value on a tie in distance: the definition, by a stable sort of the sorted column by
// distance. (Values {0, 0, 2, 2, 3}, w = 4: median 2, the closest are {2, 2, 3, 0}, mean 1.75.)
TEST(ClosestWindow, MatchesAFullScanWithTies) {
  for_each_isa([] {
    for (std::size_t m : {5u, 9u, 16u, 20u, 52u, 100u}) {
      for (std::size_t w : {std::size_t{1}, std::size_t{2}, std::size_t{4}, m / 3, m - 1}) {
        if (w < 1 || w > m) continue;
        const std::size_t d = 150;
        Rng rng(m * 100 + w);
        std::vector<float> rows(m * d);
        for (auto& v : rows) v = static_cast<float>(rng.uniform_int(6));  // many equal values
        const auto plan = [w](std::size_t, std::size_t) -> Result<detail::CoordinatePlan> {
          return detail::CoordinatePlan{detail::CoordinateOp::kClosestWindow, 0, w};
        };
        auto got = detail::coordinate_wise(InputMatrix(rows.data(), m, d), 1, plan);
        ASSERT_TRUE(got.ok());
        for (std::size_t c = 0; c < d; ++c) {
          auto v = column(rows, m, d, c);
          std::sort(v.begin(), v.end());
          // Distances in float like the kernel; a stable sort keeps the lower value first on ties.
          const float median = v[(m - 1) / 2] * 0.5f + v[m / 2] * 0.5f;
          auto by_distance = v;
          std::stable_sort(by_distance.begin(), by_distance.end(), [median](float a, float b) {
            return (a <= median ? median - a : a - median) < (b <= median ? median - b : b - median);
          });
          std::vector<float> chosen(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(w));
          std::sort(chosen.begin(), chosen.end());
          double sum = 0;
          for (const float x : chosen) sum += x;
          ASSERT_EQ(got->value[c], static_cast<float>(sum * (1.0 / static_cast<double>(w))))
              << "m=" << m << " w=" << w << " c=" << c;
        }
      }
    }
  });
}

// The mean adds up to 16 rows at once in registers, more rows eight at a time (then at most one group
// of four and a last group of one to four): every row count from 1 to 9, 15 to 17, 19 to 21, 24, 25,
// 33 and 40 (each way the groups fall), d with and without a tail of 16, every layout and thread count
// gives the row-order double sum times 1/m, rounded to float, bit for bit, at every ISA level; a non-finite row is
// found in any group and excluded. The check is on the double sums (finite iff every value added is), so columns of
// FLT_MAX stay finite and the sums of -0.0 start from +0.0 as the plain loop's do.
TEST(Mean, RowOrderDoubleSumForAnyRowCountLayoutAndThreads) {
  for_each_isa([] {
    for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 15u, 16u, 17u, 19u, 20u, 21u, 24u, 25u, 33u, 40u}) {
      for (std::size_t d : {1u, 17u, 2047u, 2049u, 7000u}) {
        for (bool poisoned : {false, true}) {
          auto rows = gaussian_rows(n, d, n * 13 + d, 1e3);
          for (std::size_t i = 0; i < n; ++i) {
            rows[i * d] = -0.0f;                                             // the mean is +0.0
            if (d > 1) rows[i * d + 1] = std::numeric_limits<float>::max();  // finite: no overflow in double
          }
          const std::size_t bad = n / 2;
          if (poisoned)
            rows[bad * d + d - 1] =
                (n % 2 == 0) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
          std::vector<float> want(d);
          const double m = static_cast<double>(poisoned ? n - 1 : n);
          for (std::size_t c = 0; c < d; ++c) {
            double sum = 0;
            for (std::size_t i = 0; i < n; ++i)
              if (!poisoned || i != bad) sum += rows[i * d + c];
            want[c] = static_cast<float>(sum * (1.0 / m));
          }
          std::vector<std::vector<float>> list;
          for (std::size_t i = 0; i < n; ++i) list.emplace_back(rows.begin() + i * d, rows.begin() + (i + 1) * d);
          auto listed = InputMatrix::from_rows(list);
          ASSERT_TRUE(listed.ok());
          for (std::size_t threads : {1u, 2u, 3u}) {
            auto contiguous = Mean(MeanOptions{threads}).aggregate(InputMatrix(rows.data(), n, d));
            auto separate = Mean(MeanOptions{threads}).aggregate(*listed);
            if (poisoned && n == 1) {
              EXPECT_FALSE(contiguous.ok());
              continue;
            }
            ASSERT_TRUE(contiguous.ok() && separate.ok());
            EXPECT_EQ(contiguous->value, want) << "n=" << n << " d=" << d << " threads=" << threads;
            EXPECT_FALSE(std::signbit(contiguous->value[0]));
            EXPECT_EQ(separate->value, want) << "n=" << n << " d=" << d << " threads=" << threads;
            EXPECT_EQ(contiguous->report.non_finite,
                      poisoned ? std::vector<std::size_t>{bad} : std::vector<std::size_t>{});
          }
        }
      }
    }
  });
}

TEST(Mean, ScaledRowsAreTheMeanOfTheRoundedProducts) {
  testing::for_each_isa([] {
    for (std::size_t n : {1u, 3u, 16u, 17u, 29u}) {
      const std::size_t d = 2051;
      auto rows = gaussian_rows(n, d, n + 5, 10.0);
      std::vector<float> scales(n);
      for (std::size_t i = 0; i < n; ++i) scales[i] = i % 3 == 0 ? 1.0f : 0.03f * static_cast<float>(i + 1);
      std::vector<float> products(n * d);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < d; ++j) products[i * d + j] = scales[i] * rows[i * d + j];
      for (std::size_t threads : {1u, 2u}) {
        auto want = Mean(MeanOptions{threads}).aggregate(InputMatrix(products.data(), n, d));
        auto got = Mean(MeanOptions{threads}).aggregate_scaled(InputMatrix(rows.data(), n, d), scales);
        ASSERT_TRUE(want.ok() && got.ok());
        EXPECT_EQ(got->value, want->value) << "n=" << n << " threads=" << threads;
      }
    }
  });
}

TEST(Mean, ScaledRowsRejectBadScales) {
  const auto rows = gaussian_rows(3, 4, 1);
  const InputMatrix inputs(rows.data(), 3, 4);
  std::vector<float> two{1.0f, 1.0f};
  EXPECT_EQ(Mean().aggregate_scaled(inputs, two).error().code, ErrorCode::kInvalidArgument);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), 1.5f, -std::numeric_limits<float>::infinity()}) {
    std::vector<float> scales{1.0f, bad, 1.0f};
    auto result = Mean().aggregate_scaled(inputs, scales);
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(result.error().message.find("outside [-1, 1]"), std::string::npos);
  }
  std::vector<float> edge{-1.0f, 0.0f, 1.0f};  // the bounds are allowed
  EXPECT_TRUE(Mean().aggregate_scaled(inputs, edge).ok());
}

TEST(CoordinateRuleSpec, Names) {
  EXPECT_EQ(Mean().spec(), "mean");
  EXPECT_EQ(TrimmedMean(TrimmedMeanOptions{2, 1}).spec(), "trimmed_mean:f=2");
  EXPECT_EQ(CoordinateMedian(MedianOptions{1, 4}).spec(), "median:f=1,threads=4");
  EXPECT_EQ(MeanAroundMedian(MeanAroundMedianOptions{3, 1}).spec(), "meamed:f=3");
}

}  // namespace
}  // namespace ballot::robust
