#include "robust/sparse_inputs.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "robust/coordinate_wise.h"
#include "robust/registry.h"

namespace ballot::robust {
namespace {

// n sparse rows of dimension d, each coordinate listed with probability `density`; values
// N(0, 1) with some exact zeros, −0 and values shared across rows.
struct SparseInputs {
  std::vector<std::vector<std::uint64_t>> indices;
  std::vector<std::vector<float>> values;
  std::size_t d = 0;

  std::vector<SparseRow> rows() const {
    std::vector<SparseRow> out;
    for (std::size_t r = 0; r < indices.size(); ++r) out.push_back({indices[r], values[r]});
    return out;
  }
  std::vector<float> dense() const {
    std::vector<float> out(indices.size() * d, 0.0f);
    for (std::size_t r = 0; r < indices.size(); ++r)
      for (std::size_t j = 0; j < indices[r].size(); ++j) out[r * d + indices[r][j]] = values[r][j];
    return out;
  }
};

SparseInputs random_inputs(std::size_t n, std::size_t d, double density, std::uint64_t seed) {
  Rng rng(seed);
  SparseInputs in;
  in.d = d;
  in.indices.resize(n);
  in.values.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < d; ++c) {
      if (rng.uniform_double() >= density) continue;
      in.indices[r].push_back(c);
      const double kind = rng.uniform_double();
      in.values[r].push_back(kind < 0.05  ? 0.0f
                             : kind < 0.1 ? -0.0f
                             : kind < 0.2 ? 1.5f
                                          : static_cast<float>(rng.normal()));
    }
  }
  return in;
}

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out;
  for (float x : v) out.push_back(std::bit_cast<std::uint32_t>(x));
  return out;
}

void expect_dense_result(Aggregator& sparse_rule, Aggregator& dense_rule, const SparseInputs& in,
                         const std::string& what) {
  const auto rows = in.rows();
  auto sparse = aggregate_sparse(sparse_rule, rows, in.d);
  const auto matrix = in.dense();
  auto dense = dense_rule.aggregate(InputMatrix(matrix.data(), rows.size(), in.d));
  ASSERT_EQ(sparse.ok(), dense.ok()) << what;
  if (!dense.ok()) {
    EXPECT_EQ(sparse.error().code, dense.error().code) << what;
    return;
  }
  EXPECT_EQ(bits(sparse->value), bits(dense->value)) << what;
  EXPECT_EQ(sparse->report.non_finite, dense->report.non_finite) << what;
  EXPECT_EQ(sparse->report.excluded, dense->report.excluded) << what;
  EXPECT_EQ(sparse->report.selected, dense->report.selected) << what;
  EXPECT_EQ(sparse->report.scores, dense->report.scores) << what;
}

std::unique_ptr<Aggregator> make(const std::string& spec) {
  auto rule = make_aggregator(spec);
  EXPECT_TRUE(rule.ok()) << spec;
  return rule.ok() ? std::move(rule).value() : nullptr;
}

TEST(SparseInputs, CoordinateRulesGiveTheDenseResultBitForBit) {
  // n = 130 takes the rules' selection path (more rows than the sorting network's 128).
  for (const std::size_t n : {1, 2, 7, 11, 20, 130}) {
    const std::size_t f = (n - 1) / 4;
    for (const double density : {0.0, 0.01, 0.2, 1.0}) {
      const auto in = random_inputs(n, 333, density, 100 * n + static_cast<std::uint64_t>(density * 100));
      for (const std::string rule : {"mean", "median", "trimmed_mean", "meamed"}) {
        for (const std::size_t threads : {1, 2}) {
          const std::string spec =
              rule + (rule == "mean" ? ":" : ":f=" + std::to_string(f) + ",") + "threads=" + std::to_string(threads);
          auto sparse_rule = make(spec);
          auto dense_rule = make(spec);
          ASSERT_TRUE(sparse_rule->coordinate_wise()) << spec;
          expect_dense_result(*sparse_rule, *dense_rule, in, spec + " n=" + std::to_string(n));
        }
      }
    }
  }
}

// Wide enough that the dense rules run whole column blocks (their fused path) and several
// blocks per thread.
TEST(SparseInputs, WideInputsGiveTheDenseResult) {
  const auto in = random_inputs(9, 20000, 0.02, 77);
  for (const char* spec : {"mean", "median:f=2", "trimmed_mean:f=2,threads=2", "meamed:f=2"}) {
    auto sparse_rule = make(spec);
    auto dense_rule = make(spec);
    expect_dense_result(*sparse_rule, *dense_rule, in, spec);
  }
}

TEST(SparseInputs, NonFiniteRowsAreExcludedAsInTheDenseMatrix) {
  auto in = random_inputs(11, 500, 0.05, 7);
  in.values[3].back() = std::numeric_limits<float>::quiet_NaN();
  in.values[8].front() = -std::numeric_limits<float>::infinity();
  for (const char* spec : {"mean", "median:f=2", "trimmed_mean:f=2", "meamed:f=2", "krum:f=2"}) {
    auto sparse_rule = make(spec);
    auto dense_rule = make(spec);
    expect_dense_result(*sparse_rule, *dense_rule, in, spec);
    const auto rows = in.rows();
    auto result = aggregate_sparse(*sparse_rule, rows, in.d);
    ASSERT_TRUE(result.ok()) << spec;
    EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{3, 8})) << spec;
  }
  // Every row non-finite: the dense rule's error.
  for (auto& values : in.values) values.assign(values.size(), std::numeric_limits<float>::quiet_NaN());
  in.indices[0].assign(1, 0);
  in.values[0].assign(1, std::numeric_limits<float>::quiet_NaN());
  Mean mean;
  Mean reference;
  expect_dense_result(mean, reference, in, "all non-finite");
}

TEST(SparseInputs, EmptyRowsAndEveryColumnListed) {
  SparseInputs empty;
  empty.d = 40;
  empty.indices.resize(5);
  empty.values.resize(5);
  TrimmedMean rule(TrimmedMeanOptions{1, 1});
  auto result = aggregate_sparse(rule, empty.rows(), empty.d);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(bits(result->value), std::vector<std::uint32_t>(40, 0u));

  const auto full = random_inputs(5, 64, 1.0, 3);
  ASSERT_EQ(full.indices[0].size(), 64u);
  TrimmedMean a(TrimmedMeanOptions{1, 1}), b(TrimmedMeanOptions{1, 1});
  expect_dense_result(a, b, full, "every column listed");

  SparseInputs none;  // d = 0
  none.indices.resize(3);
  none.values.resize(3);
  auto zero = aggregate_sparse(rule, none.rows(), 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->value.empty());
}

TEST(SparseInputs, PreconditionsAreTheRules) {
  const auto in = random_inputs(3, 50, 0.1, 5);
  TrimmedMean rule(TrimmedMeanOptions{2, 1});  // needs n >= 5
  auto result = aggregate_sparse(rule, in.rows(), in.d);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
}

TEST(SparseInputs, MalformedRowsAreRefusedAndNamed) {
  const std::vector<std::uint64_t> rising = {1, 4, 9};
  const std::vector<std::uint64_t> repeated = {1, 4, 4};
  const std::vector<std::uint64_t> falling = {4, 1, 9};
  const std::vector<std::uint64_t> outside = {1, 4, 10};
  const std::vector<float> three = {1, 2, 3};
  const std::vector<float> two = {1, 2};
  Mean mean;
  const std::vector<std::pair<SparseRow, std::string>> cases = {
      {{repeated, three}, "not strictly rising"},
      {{falling, three}, "not strictly rising"},
      {{outside, three}, "index 10 >= d = 10"},
      {{rising, two}, "3 indices for 2 values"},
  };
  for (const auto& [bad, message] : cases) {
    const std::vector<SparseRow> rows = {{rising, three}, bad};
    auto result = aggregate_sparse(mean, rows, 10);
    ASSERT_FALSE(result.ok()) << message;
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(result.error().message.find("sparse input 1"), std::string::npos) << result.error().message;
    EXPECT_NE(result.error().message.find(message), std::string::npos) << result.error().message;
  }
}

TEST(SparseInputs, OnlyTheCoordinateRulesAreCoordinateWise) {
  for (const RuleEntry& entry : rule_table()) {
    auto rule = make(example_with_f(entry, 2));
    const bool expected =
        entry.name == "mean" || entry.name == "median" || entry.name == "trimmed_mean" || entry.name == "meamed";
    EXPECT_EQ(rule->coordinate_wise(), expected) << entry.name;
  }
  EXPECT_FALSE(make("bucketing:s=2 > mean")->coordinate_wise());
  EXPECT_FALSE(make("clipping:tau=1 > median:f=2")->coordinate_wise());
}

}  // namespace
}  // namespace ballot::robust
