#include "robust/cuda/distances.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "robust/detail/common.h"
#include "robust/krum.h"
#include "robust/registry.h"
#include "tests/robust/robust_test_util.h"

namespace ballot::robust::cuda {
namespace {

using robust::testing::gaussian_rows;

// n rows, each N(center_i, 1) with its own center (so that no two Krum scores nearly tie), the
// last f rows far away (the Byzantine ones Krum must not choose).
std::vector<float> spread_rows(std::size_t n, std::size_t d, std::size_t f, std::uint64_t seed) {
  std::vector<float> rows(n * d);
  for (std::size_t i = 0; i < n; ++i) {
    const double center = i + f >= n ? 25.0 + static_cast<double>(i) : 0.05 * static_cast<double>(i);
    const auto row = gaussian_rows(1, d, seed * 1000 + i, 1.0, center);
    std::copy(row.begin(), row.end(), rows.begin() + static_cast<std::ptrdiff_t>(i * d));
  }
  return rows;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::unique_ptr<Aggregator> cpu_rule(const DistanceRule& rule) {
  if (!rule.multi) return std::make_unique<Krum>(KrumOptions{rule.f, 1});
  return std::make_unique<MultiKrum>(MultiKrumOptions{rule.f, rule.m, 1});
}

// The GPU rule against the CPU rule: the same choice, report and value bits (or the same error);
// scores equal up to the Gram's rounding.
void expect_same_as_cpu(const DistanceRule& rule, const std::vector<float>& rows, std::size_t n, std::size_t d) {
  const InputMatrix inputs(rows.data(), n, d);
  auto gpu = distance_rule_on_device(rule, inputs);
  auto cpu = cpu_rule(rule)->aggregate(inputs);
  ASSERT_EQ(gpu.ok(), cpu.ok()) << (gpu.ok() ? cpu.error().to_string() : gpu.error().to_string());
  if (!cpu.ok()) {
    EXPECT_EQ(gpu.error().code, cpu.error().code);
    EXPECT_EQ(gpu.error().message, cpu.error().message);
    return;
  }
  EXPECT_EQ(gpu->report.selected, cpu->report.selected);
  EXPECT_EQ(gpu->report.excluded, cpu->report.excluded);
  EXPECT_EQ(gpu->report.non_finite, cpu->report.non_finite);
  EXPECT_TRUE(same_bits(gpu->value, cpu->value));
  ASSERT_EQ(gpu->report.scores.size(), cpu->report.scores.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double g = gpu->report.scores[i], c = cpu->report.scores[i];
    if (std::isinf(c)) {
      EXPECT_EQ(g, c) << "score " << i;
    } else {
      EXPECT_NEAR(g, c, 1e-4 * std::abs(c) + 1e-6) << "score " << i;
    }
  }
}

TEST(DistanceRules, TheTwinsOfTheRegistryRules) {
  auto twin = [](const std::string& spec) {
    auto rule = make_aggregator(spec);
    EXPECT_TRUE(rule.ok()) << spec;
    return distance_rule(**rule);
  };
  const auto krum = twin("krum:f=2");
  ASSERT_TRUE(krum.has_value());
  EXPECT_FALSE(krum->multi);
  EXPECT_EQ(krum->f, 2u);
  EXPECT_EQ(krum->m, 1u);
  const auto multi = twin("multi_krum:f=1,m=3");
  ASSERT_TRUE(multi.has_value());
  EXPECT_TRUE(multi->multi);
  EXPECT_EQ(multi->f, 1u);
  EXPECT_EQ(multi->m, 3u);
  EXPECT_FALSE(twin("median:f=1").has_value());
  EXPECT_FALSE(twin("bulyan:f=1").has_value());
  EXPECT_FALSE(twin("nnm:f=1 > krum:f=1").has_value());
}

TEST(DistanceRules, ChosenCountAndPreconditionsWithoutADevice) {
  EXPECT_EQ(*chosen_count(DistanceRule{1, 1, false}, 5), 1u);
  EXPECT_EQ(*chosen_count(DistanceRule{2, 0, true}, 10), 8u);
  EXPECT_EQ(*chosen_count(DistanceRule{2, 4, true}, 10), 4u);
  // The CPU rules' errors, code and message.
  const auto krum = chosen_count(DistanceRule{1, 1, false}, 4);
  ASSERT_FALSE(krum.ok());
  EXPECT_EQ(krum.error().message, Krum::check(4, 1).error().message);
  const auto multi = chosen_count(DistanceRule{1, 11, true}, 10);
  ASSERT_FALSE(multi.ok());
  EXPECT_EQ(multi.error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(multi.error().message, MultiKrum::check(10, 1, 11).error().message);
}

TEST(DistanceRules, ArgumentsAreCheckedBeforeTheDevice) {
  float out[1];
  const float in[1] = {0.0f};
  const DistanceRule krum{0, 1, false};
  EXPECT_EQ(distance_rule_on_device(krum, nullptr, 3, 4, out, nullptr).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(distance_rule_on_device(krum, in, 3, 4, nullptr, nullptr).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(distance_rule_on_device(krum, in, 2, 4, out, nullptr).error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(gram_on_device(nullptr, 3, 4, nullptr).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(gram_on_device(in, 0, 4, nullptr).error().code, ErrorCode::kPrecondition);
  if (kernels::cuda::device_count() == 0) {
    const std::vector<float> rows(3 * 4, 1.0f);
    EXPECT_EQ(distance_rule_on_device(krum, InputMatrix(rows.data(), 3, 4)).error().code, ErrorCode::kUnavailable);
    // cuBLAS is loaded (dlopen) and resolved before the device is asked for: the toolkit that
    // built this has it, so what is missing is the device, not the library or a symbol.
    const auto gram = gram_on_device(in, 3, 4, nullptr);
    ASSERT_FALSE(gram.ok());
    EXPECT_EQ(gram.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(gram.error().message.find("cuBLAS"), std::string::npos) << gram.error().message;
  }
}

class DistanceRulesOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

// Sizes around the Gram's column blocks (kGramColumns = 4096) and the warp, with and without a
// tail block, and several n (one batched SGEMM over every whole block).
TEST_F(DistanceRulesOnDevice, MatchTheCpuRules) {
  for (std::size_t n : {5u, 7u, 10u, 25u, 64u}) {
    const std::size_t f = (n - 3) / 2;
    for (std::size_t d : {0u, 1u, 63u, 64u, 65u, 4095u, 4096u, 4097u, 3u * 4096u + 17u, (1u << 20) + 3u}) {
      if (n == 64 && d > 5000) continue;  // the large d runs with n ≤ 25
      const auto rows = spread_rows(n, d, f, n * 31 + d);
      for (const DistanceRule& rule :
           {DistanceRule{f, 1, false}, DistanceRule{f, 0, true}, DistanceRule{f / 2, 3, true}}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " d=" + std::to_string(d) + " f=" + std::to_string(rule.f) +
                     (rule.multi ? " multi m=" + std::to_string(rule.m) : " krum"));
        expect_same_as_cpu(rule, rows, n, d);
      }
    }
  }
}

// A NaN row and an ±Inf row are non-finite; a finite row whose squared norm overflows is unusable
// but not non-finite (f = 2: the usable rows still have finite scores, and the report names rows
// 1 and 4); with too few usable rows the CPU rule's precondition error.
TEST_F(DistanceRulesOnDevice, NonFiniteAndOverflowingRowsAsTheCpu) {
  const std::size_t n = 9, d = 4099;
  auto rows = spread_rows(n, d, 0, 7);
  rows[1 * d + 17] = std::numeric_limits<float>::quiet_NaN();
  rows[4 * d + d - 1] = -std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < d; ++j) rows[6 * d + j] = 3e30f;
  const auto cpu = Krum(KrumOptions{2, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(cpu.ok()) << cpu.error().to_string();
  ASSERT_EQ(cpu->report.non_finite, (std::vector<std::size_t>{1, 4}));  // the case this test is about
  for (const DistanceRule& rule : {DistanceRule{2, 1, false}, DistanceRule{2, 6, true}, DistanceRule{2, 0, true}}) {
    expect_same_as_cpu(rule, rows, n, d);
  }
  // f = 1: every usable row needs 6 usable neighbours, 5 are left, so no score is finite.
  expect_same_as_cpu(DistanceRule{1, 1, false}, rows, n, d);
}

// Calls of different block counts share one buffer of chunk sums, sized for the largest call:
// 513 blocks in calls of 257 (9 chunks of 32) then 256 (16 chunks of 16) write within it (run
// under compute-sanitizer by device_check.sh), and sum what one call sums, up to rounding.
TEST_F(DistanceRulesOnDevice, CallsWithFewerBlocksFitTheChunkBuffer) {
  const std::size_t n = 12, d = 513 * 4096;
  const auto rows = spread_rows(n, d, 2, 5);
  float* d_rows = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_rows), rows.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  auto split = gram_on_device(d_rows, n, d, nullptr, 257 * n * n);
  auto whole = gram_on_device(d_rows, n, d, nullptr);
  cudaFree(d_rows);
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  // Equal up to the float rounding of the blocks (cuBLAS may choose its kernel by batch size).
  for (std::size_t e = 0; e < n * n; ++e) EXPECT_NEAR((*split)[e], (*whole)[e], 1e-5 * std::abs((*whole)[e]) + 1e-3);
}

// The Gram matrix against the CPU's (Eigen's float blocks summed in double): equal up to rounding,
// for a few blocks (one chunk) and for 41 blocks (three chunks of 16 and the tail), in one SGEMM
// call or one call per block, and the same bits when run again.
TEST_F(DistanceRulesOnDevice, GramMatchesTheCpuUpToRounding) {
  const std::size_t n = 12;
  for (std::size_t d : {3u * 4096u + 100u, 40u * 4096u + 7u}) {
    SCOPED_TRACE("d=" + std::to_string(d));
    const auto rows = spread_rows(n, d, 2, 3);
    float* d_rows = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_rows), rows.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    auto gram = gram_on_device(d_rows, n, d, stream);
    auto again = gram_on_device(d_rows, n, d, stream);
    auto split = gram_on_device(d_rows, n, d, stream, n * n);  // one block per call
    cudaStreamDestroy(stream);
    cudaFree(d_rows);
    ASSERT_TRUE(gram.ok()) << gram.error().to_string();
    ASSERT_TRUE(again.ok() && split.ok());
    EXPECT_EQ(*again, *gram);
    const auto cpu = detail::pairwise_distances(InputMatrix(rows.data(), n, d), 1);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j <= i; ++j) {
        const double want = cpu.gram[i * n + j];
        EXPECT_NEAR((*gram)[i * n + j], want, 1e-5 * std::abs(want) + 1e-3) << i << "," << j;
        // cuBLAS may pick another kernel (another float order) for a batch of one block.
        EXPECT_NEAR((*split)[i * n + j], want, 1e-5 * std::abs(want) + 1e-3) << i << "," << j;
      }
      for (std::size_t j = i + 1; j < n; ++j) EXPECT_EQ((*gram)[i * n + j], 0.0);
    }
  }
}

}  // namespace
}  // namespace ballot::robust::cuda
