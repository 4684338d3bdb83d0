#include "robust/cuda/detail/coordinate_logic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "tests/robust/cuda/coordinate_test_util.h"

// The kernels' per-coordinate code, run here on the host through the kernels' own two passes,
// against the CPU rules: what the GPU must compute is checked on every machine, with no GPU.
namespace ballot::robust::cuda {
namespace {

using testing::Values;

template <int kWires>
void expect_network_sorts() {
  SCOPED_TRACE(kWires);
  Rng rng(kWires);
  for (int trial = 0; trial < 2000; ++trial) {
    float v[kWires];
    std::vector<float> expected(kWires);
    for (int i = 0; i < kWires; ++i) {
      // Few distinct values (duplicates), some +∞ padding, both zeros.
      const auto pick = rng.uniform_int(trial % 2 == 0 ? 5 : 1000);
      v[i] = pick == 0 ? infinity() : static_cast<float>(pick) - 3.0f;
      expected[i] = v[i];
    }
    std::sort(expected.begin(), expected.end());
    sort_wires(v);
    for (int i = 0; i < kWires; ++i) ASSERT_EQ(v[i], expected[i]) << "trial " << trial << ", wire " << i;
  }
}

TEST(RobustCudaLogic, NetworksSortEveryInput) {
  expect_network_sorts<8>();
  expect_network_sorts<16>();
  expect_network_sorts<24>();
  expect_network_sorts<32>();
  expect_network_sorts<48>();
  expect_network_sorts<64>();
}

// 0-1 principle: a comparator network that sorts every 0/1 input sorts every input.
TEST(RobustCudaLogic, SixteenWireNetworkSortsEveryZeroOneInput) {
  for (std::uint32_t word = 0; word < (1u << 16); ++word) {
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = static_cast<float>((word >> i) & 1u);
    sort_wires(v);
    ASSERT_TRUE(std::is_sorted(v, v + 16)) << word;
  }
}

TEST(RobustCudaLogic, WiresCoverEveryRowCount) {
  for (int n = 1; n <= kMaxRows; ++n) EXPECT_GE(wires_for(n), n);
  EXPECT_EQ(wires_for(25), 32);
  EXPECT_EQ(wires_for(64), 64);
}

// The kernels' two passes on the host: every row, then (if any was non-finite) without them.
template <CoordinateOp kOp, int kWires>
std::vector<float> run_passes(const std::vector<float>& rows, int n, std::size_t d, int f, std::uint64_t& non_finite) {
  std::vector<float> out(d);
  CoordinatePlan plan = plan_for(kOp, n, f, 0);
  non_finite = 0;
  for (std::size_t j = 0; j < d; ++j) non_finite |= reduce_column<kOp, kWires>(rows.data(), d, j, plan, out.data());
  if (non_finite != 0) {
    plan = plan_for(kOp, n, f, non_finite);
    for (std::size_t j = 0; j < d; ++j) {
      const std::uint64_t again = reduce_column<kOp, kWires>(rows.data(), d, j, plan, out.data());
      EXPECT_EQ(again, 0u);  // the second pass reads no non-finite row
    }
  }
  return out;
}
template <CoordinateOp kOp>
std::vector<float> run_passes(const std::vector<float>& rows, int n, std::size_t d, int f, std::uint64_t& non_finite) {
  switch (wires_for(n)) {
    case 8:
      return run_passes<kOp, 8>(rows, n, d, f, non_finite);
    case 16:
      return run_passes<kOp, 16>(rows, n, d, f, non_finite);
    case 24:
      return run_passes<kOp, 24>(rows, n, d, f, non_finite);
    case 32:
      return run_passes<kOp, 32>(rows, n, d, f, non_finite);
    case 48:
      return run_passes<kOp, 48>(rows, n, d, f, non_finite);
    default:
      return run_passes<kOp, 64>(rows, n, d, f, non_finite);
  }
}
std::vector<float> emulate(CoordinateRule rule, const std::vector<float>& rows, std::size_t n, std::size_t d,
                           std::size_t f, std::uint64_t& non_finite) {
  const int rows_n = static_cast<int>(n), rule_f = rule == CoordinateRule::kMean ? 0 : static_cast<int>(f);
  switch (rule) {
    case CoordinateRule::kMean:
      return run_passes<CoordinateOp::kMean>(rows, rows_n, d, rule_f, non_finite);
    case CoordinateRule::kMedian:
      return run_passes<CoordinateOp::kMedian>(rows, rows_n, d, rule_f, non_finite);
    case CoordinateRule::kTrimmedMean:
      return run_passes<CoordinateOp::kTrimmedMean>(rows, rows_n, d, rule_f, non_finite);
    case CoordinateRule::kMeanAroundMedian:
      return run_passes<CoordinateOp::kClosestWindow>(rows, rows_n, d, rule_f, non_finite);
  }
  return {};
}

// The emulated kernels against the CPU rule at every ISA level this machine has.
void expect_same_as_cpu(CoordinateRule rule, const std::vector<float>& rows, std::size_t n, std::size_t d,
                        std::size_t f) {
  std::uint64_t non_finite = 0;
  const auto out = emulate(rule, rows, n, d, f, non_finite);
  std::vector<std::size_t> non_finite_rows;
  for (std::size_t i = 0; i < n; ++i)
    if ((non_finite >> i) & 1u) non_finite_rows.push_back(i);
  for (auto isa : kernels::supported_isas()) {
    kernels::ScopedIsaLimit cap(isa);
    SCOPED_TRACE(std::string(kernels::isa_name(isa)));
    auto cpu = testing::cpu_rule(rule, f)->aggregate(InputMatrix(rows.data(), n, d));
    if (non_finite_rows.size() == n && n > 0 && d > 0) {
      ASSERT_FALSE(cpu.ok());
      EXPECT_EQ(cpu.error().code, ErrorCode::kPrecondition);
      for (float v : out) EXPECT_TRUE(std::isnan(v));
      continue;
    }
    ASSERT_TRUE(cpu.ok()) << cpu.error().to_string();
    EXPECT_TRUE(testing::same_bits(out, cpu->value));
    EXPECT_EQ(non_finite_rows, cpu->report.non_finite);
  }
}

TEST(RobustCudaLogic, EveryRuleMatchesTheCpuBitForBit) {
  const std::size_t d = 67;
  for (std::size_t n :
       {1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 15u, 16u, 17u, 24u, 25u, 31u, 32u, 33u, 47u, 48u, 49u, 63u, 64u}) {
    for (auto values : testing::kPortableValues) {
      for (auto rule : testing::kRules) {
        for (std::size_t f : testing::f_values(n)) {
          SCOPED_TRACE(std::string(testing::rule_name(rule)) + " n=" + std::to_string(n) + " f=" + std::to_string(f) +
                       " values=" + std::to_string(static_cast<int>(values)));
          const auto rows = testing::make_rows(n, d, values, 1000 * n + 10 * f + static_cast<int>(values));
          expect_same_as_cpu(rule, rows, n, d, f);
        }
      }
    }
  }
}

// k non-finite rows, from none to all: excluded from every coordinate, counted against f.
TEST(RobustCudaLogic, NonFiniteRowsAreExcludedAsOnTheCpu) {
  const std::size_t d = 33;
  for (std::size_t n : {1u, 2u, 5u, 15u, 25u, 64u}) {
    for (std::size_t k = 0; k <= n; k += (n > 16 ? 3 : 1)) {
      for (auto rule : testing::kRules) {
        for (std::size_t f : testing::f_values(n)) {
          SCOPED_TRACE(std::string(testing::rule_name(rule)) + " n=" + std::to_string(n) + " f=" + std::to_string(f) +
                       " k=" + std::to_string(k));
          auto rows = testing::make_rows(n, d, Values::kTies, 7 * n + k);
          testing::spoil_rows(rows, n, d, k, 11 * n + k);
          expect_same_as_cpu(rule, rows, n, d, f);
        }
      }
    }
  }
}

// Subnormal middle values: MeaMed's median rounds both halves on every level (robust's ISA units
// compile with -ffp-contract=off; when GCC fused one half into a multiply-add at the AVX levels, a
// subnormal half moved the median by one unit in the last place).
TEST(RobustCudaLogic, SubnormalValuesMatchEveryLevel) {
  const std::size_t d = 257;
  for (std::size_t n : {2u, 3u, 4u, 8u, 15u, 25u, 64u}) {
    for (auto rule : testing::kRules) {
      for (std::size_t f : testing::f_values(n)) {
        SCOPED_TRACE(std::string(testing::rule_name(rule)) + " n=" + std::to_string(n) + " f=" + std::to_string(f));
        expect_same_as_cpu(rule, testing::make_rows(n, d, Values::kTiny, n + f), n, d, f);
      }
    }
  }
}

TEST(RobustCudaLogic, NoCoordinatesNoWork) {
  for (auto rule : testing::kRules) expect_same_as_cpu(rule, {}, 5, 0, 1);
}

}  // namespace
}  // namespace ballot::robust::cuda
