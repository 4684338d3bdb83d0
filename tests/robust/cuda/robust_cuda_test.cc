#include "robust/cuda/robust_cuda.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/isa.h"
#include "robust/registry.h"
#include "tests/robust/cuda/coordinate_test_util.h"

namespace ballot::robust::cuda {
namespace {

using testing::Values;

class RobustCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

// The GPU rule against the CPU rule at every ISA level: the same bits, the same report, the same
// error when every input is non-finite.
void expect_same_as_cpu(CoordinateRule rule, const std::vector<float>& rows, std::size_t n, std::size_t d,
                        std::size_t f) {
  const InputMatrix inputs(rows.data(), n, d);
  auto gpu = coordinate_wise_on_device(rule, f, inputs);
  for (auto isa : kernels::supported_isas()) {
    kernels::ScopedIsaLimit cap(isa);
    SCOPED_TRACE(std::string(kernels::isa_name(isa)));
    auto cpu = testing::cpu_rule(rule, f)->aggregate(inputs);
    ASSERT_EQ(gpu.ok(), cpu.ok()) << (gpu.ok() ? cpu.error().to_string() : gpu.error().to_string());
    if (!cpu.ok()) {
      EXPECT_EQ(gpu.error().code, cpu.error().code);
      EXPECT_EQ(gpu.error().message, cpu.error().message);
      continue;
    }
    EXPECT_TRUE(testing::same_bits(gpu->value, cpu->value));
    EXPECT_EQ(gpu->report.non_finite, cpu->report.non_finite);
    EXPECT_EQ(gpu->report.excluded, cpu->report.excluded);
  }
}

std::string trace(CoordinateRule rule, std::size_t n, std::size_t d, std::size_t f) {
  return std::string(testing::rule_name(rule)) + " n=" + std::to_string(n) + " d=" + std::to_string(d) +
         " f=" + std::to_string(f);
}

TEST(RobustCudaArguments, AreCheckedWithoutADevice) {
  float dummy_out[1];
  std::uint64_t dummy_word = 0;
  const float dummy_in[1] = {0.0f};
  // The CPU rules' preconditions, with their codes and messages.
  EXPECT_EQ(check(CoordinateRule::kMean, 0, 0).error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(check(CoordinateRule::kMedian, 4, 2).error().message, CoordinateMedian::check(4, 2).error().message);
  EXPECT_EQ(check(CoordinateRule::kTrimmedMean, 4, 2).error().code, ErrorCode::kPrecondition);
  EXPECT_EQ(check(CoordinateRule::kMeanAroundMedian, 2, 1).error().code, ErrorCode::kPrecondition);
  EXPECT_TRUE(check(CoordinateRule::kMean, 3, 7).ok());  // the mean has no f
  EXPECT_TRUE(check(CoordinateRule::kMedian, 64, 31).ok());
  // More than 64 inputs.
  const auto too_many = check(CoordinateRule::kMedian, 65, 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(too_many.error().message.find("at most 64"), std::string::npos) << too_many.error().message;
  // coordinate_wise checks the same before it touches the device, then its pointers.
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMean, 0, dummy_in, 65, 1, dummy_out, &dummy_word, nullptr).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMedian, 2, dummy_in, 3, 1, dummy_out, &dummy_word, nullptr).error().code,
            ErrorCode::kPrecondition);
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMedian, 1, dummy_in, 3, 1, dummy_out, nullptr, nullptr).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMedian, 1, nullptr, 3, 1, dummy_out, &dummy_word, nullptr).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMedian, 1, dummy_in, 3, 1, nullptr, &dummy_word, nullptr).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(coordinate_wise(CoordinateRule::kMean, 0, dummy_in, 2, SIZE_MAX / 4, dummy_out, &dummy_word, nullptr)
                .error()
                .code,
            ErrorCode::kInvalidArgument);
  // The host convenience too.
  const std::vector<float> rows(65 * 2, 1.0f);
  EXPECT_EQ(coordinate_wise_on_device(CoordinateRule::kMean, 0, InputMatrix(rows.data(), 65, 2)).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(coordinate_wise_on_device(CoordinateRule::kTrimmedMean, 3, InputMatrix(rows.data(), 5, 2)).error().code,
            ErrorCode::kPrecondition);
}

// Needs no device: which registry rules have a device twin, with their f.
TEST(RobustCudaArguments, DeviceTwinsOfTheRegistryRules) {
  struct Case {
    const char* spec;
    CoordinateRule rule;
    std::size_t f;
  };
  for (const Case& c :
       {Case{"mean", CoordinateRule::kMean, 0}, Case{"mean:threads=2", CoordinateRule::kMean, 0},
        Case{"median:f=3", CoordinateRule::kMedian, 3}, Case{"trimmed_mean:f=2", CoordinateRule::kTrimmedMean, 2},
        Case{"meamed:f=1", CoordinateRule::kMeanAroundMedian, 1}}) {
    auto aggregator = make_aggregator(c.spec);
    ASSERT_TRUE(aggregator.ok()) << c.spec;
    const auto twin = device_rule(**aggregator);
    ASSERT_TRUE(twin.has_value()) << c.spec;
    EXPECT_EQ(twin->rule, c.rule) << c.spec;
    EXPECT_EQ(twin->f, c.f) << c.spec;
  }
  for (const char* spec : {"krum:f=1", "geometric_median", "nnm:f=1 > trimmed_mean:f=1", "bucketing:s=2 > median:f=1",
                           "multi_krum:f=1", "centered_clipping"}) {
    auto aggregator = make_aggregator(spec);
    ASSERT_TRUE(aggregator.ok()) << spec;
    EXPECT_FALSE(device_rule(**aggregator).has_value()) << spec;
  }
}

TEST(RobustCudaWithoutDevice, ReportsUnavailableInsteadOfCrashing) {
  if (kernels::cuda::device_count() != 0) GTEST_SKIP() << "a device is present";
  const std::vector<float> rows(6, 1.0f);
  auto result = coordinate_wise_on_device(CoordinateRule::kMedian, 1, InputMatrix(rows.data(), 3, 2));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kUnavailable);
}

TEST_F(RobustCuda, MatchesTheCpuAtBoundarySizes) {
  for (std::size_t d : {0u, 1u, 63u, 64u, 65u, 1000u}) {
    for (std::size_t n : {1u, 2u, 3u, 7u, 15u, 25u, 64u}) {
      for (auto rule : testing::kRules) {
        for (std::size_t f : testing::f_values(n)) {
          SCOPED_TRACE(trace(rule, n, d, f));
          auto rows = testing::make_rows(n, d, Values::kGaussian, 100 * n + d + f);
          // Every third case with non-finite rows: none, up to f, or more than f of them.
          if ((n + d + f) % 3 == 0) testing::spoil_rows(rows, n, d, (n + f) % (f + 3), d + n);
          expect_same_as_cpu(rule, rows, n, d, f);
        }
      }
    }
  }
}

TEST_F(RobustCuda, MatchesTheCpuOnALargeInput) {
  const std::size_t d = (std::size_t{1} << 20) + 3;
  for (std::size_t n : {2u, 7u, 25u, 64u}) {
    for (auto rule : testing::kRules) {
      const std::size_t f = (n - 1) / 4;
      SCOPED_TRACE(trace(rule, n, d, f));
      auto rows = testing::make_rows(n, d, n == 25 ? Values::kWideRange : Values::kGaussian, n);
      if (n == 7) testing::spoil_rows(rows, n, d, 1, 3);
      expect_same_as_cpu(rule, rows, n, d, f);
    }
  }
}

// Ties, signed zeros, overflowing distances and wide magnitudes, at every row count.
TEST_F(RobustCuda, MatchesTheCpuOnHardValues) {
  const std::size_t d = 257;
  for (std::size_t n = 1; n <= 64; n += (n < 10 ? 1 : 7)) {
    for (auto values : {Values::kTies, Values::kExtreme, Values::kWideRange, Values::kWideTies}) {
      for (auto rule : testing::kRules) {
        for (std::size_t f : testing::f_values(n)) {
          SCOPED_TRACE(trace(rule, n, d, f) + " values=" + std::to_string(static_cast<int>(values)));
          expect_same_as_cpu(rule, testing::make_rows(n, d, values, 31 * n + f), n, d, f);
        }
      }
    }
  }
}

// Subnormal middle values (MeaMed's median rounds both halves: coordinate_logic_test says why).
TEST_F(RobustCuda, MatchesEveryLevelOnSubnormals) {
  const std::size_t d = 1000;
  for (std::size_t n : {2u, 4u, 15u, 25u, 64u}) {
    for (auto rule : testing::kRules) {
      for (std::size_t f : testing::f_values(n)) {
        SCOPED_TRACE(trace(rule, n, d, f));
        expect_same_as_cpu(rule, testing::make_rows(n, d, Values::kTiny, 77 * n + f), n, d, f);
      }
    }
  }
}

// k non-finite rows, from none to all of them: excluded and counted against f as on the CPU, and
// kPrecondition (the CPU's error and message) when none is left.
TEST_F(RobustCuda, ExcludesNonFiniteRowsAsTheCpuDoes) {
  const std::size_t n = 15, d = 1000;
  for (std::size_t k = 0; k <= n; ++k) {
    for (auto rule : testing::kRules) {
      for (std::size_t f : {0u, 3u, 7u}) {
        SCOPED_TRACE(trace(rule, n, d, f) + " k=" + std::to_string(k));
        auto rows = testing::make_rows(n, d, Values::kTies, k);
        testing::spoil_rows(rows, n, d, k, 100 + k);
        expect_same_as_cpu(rule, rows, n, d, f);
      }
    }
  }
}

// The device API on a stream of its own: the mask word, and NaN outputs when every row is
// non-finite.
TEST_F(RobustCuda, DeviceApiReportsNonFiniteRowsInItsWord) {
  const std::size_t n = 5, d = 300;
  auto rows = testing::make_rows(n, d, Values::kGaussian, 5);
  rows[1 * d + 17] = std::numeric_limits<float>::quiet_NaN();
  rows[3 * d + 299] = -std::numeric_limits<float>::infinity();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  float *d_inputs = nullptr, *d_out = nullptr;
  std::uint64_t* d_word = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_inputs), n * d * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), d * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_word), sizeof(std::uint64_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_word, 0xff, sizeof(std::uint64_t)), cudaSuccess);  // must be overwritten
  ASSERT_EQ(cudaMemcpy(d_inputs, rows.data(), n * d * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(coordinate_wise(CoordinateRule::kMedian, 2, d_inputs, n, d, d_out, d_word, stream).ok());
  std::vector<float> out(d);
  std::uint64_t word = 0;
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d_out, d * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&word, d_word, sizeof word, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(word, (1u << 1) | (1u << 3));
  auto cpu = CoordinateMedian(MedianOptions{2, 1}).aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(testing::same_bits(out, cpu->value));

  for (std::size_t i = 0; i < n; ++i) rows[i * d + i] = std::numeric_limits<float>::infinity();
  ASSERT_EQ(cudaMemcpy(d_inputs, rows.data(), n * d * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(coordinate_wise(CoordinateRule::kMean, 0, d_inputs, n, d, d_out, d_word, stream).ok());
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d_out, d * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&word, d_word, sizeof word, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(word, (std::uint64_t{1} << n) - 1);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  cudaFree(d_inputs);
  cudaFree(d_out);
  cudaFree(d_word);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ballot::robust::cuda
