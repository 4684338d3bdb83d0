#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/rng.h"
#include "kernels/majority_vote.h"
#include "kernels/momentum.h"
#include "kernels/sign_kernels.h"
#include "learning/optimizer.h"

namespace ballot::kernels::cuda {
namespace {

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = static_cast<float>(rng.normal());
  return values;
}

TEST(CudaKernelsWithoutDevice, ReportUnavailableInsteadOfCrashing) {
  if (device_count() != 0) GTEST_SKIP() << "a device is present";
  auto packed = pack_signs_on_device(std::vector<float>{1.0f, -1.0f});
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.error().code, ErrorCode::kUnavailable);
}

TEST_F(CudaKernels, PackMatchesCpuAtBoundarySizes) {
  for (std::size_t size : {0u, 1u, 31u, 32u, 33u, 63u, 64u, 65u, (1u << 24) + 5}) {
    const auto values = random_values(size, size);
    auto packed = pack_signs_on_device(values);
    ASSERT_TRUE(packed.ok()) << packed.error().to_string();
    EXPECT_EQ(*packed, kernels::pack_signs(values)) << "size " << size;
  }
}

TEST_F(CudaKernels, UnpackMatchesCpu) {
  for (std::size_t size : {0u, 1u, 63u, 64u, 65u, 100003u}) {
    const BitVector bits = kernels::pack_signs(random_values(size, 9 + size));
    auto out = unpack_signs_on_device(bits, 0.5f);
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    std::vector<float> expected(size);
    kernels::unpack_signs(bits, expected, 0.5f);
    EXPECT_EQ(*out, expected);
  }
}

TEST_F(CudaKernels, VoteMatchesCpuForOneToSixtyFourInputs) {
  for (std::size_t n = 1; n <= 64; ++n) {
    std::vector<BitVector> inputs;
    for (std::size_t i = 0; i < n; ++i) inputs.push_back(kernels::pack_signs(random_values(4097, 100 * n + i)));
    auto gpu = majority_vote_on_device(inputs);
    ASSERT_TRUE(gpu.ok()) << gpu.error().to_string();
    BitVector cpu;
    kernels::majority_vote(inputs, cpu);
    EXPECT_EQ(*gpu, cpu) << "n = " << n;
  }
}

// The GPU draws the same random stream as the CPU (core/philox.h shared by both).
TEST_F(CudaKernels, PhiloxStreamMatchesCpuRng) {
  auto words = philox_words_on_device(123, Rng::stream_id({7, 3}), 0, 100003);
  ASSERT_TRUE(words.ok()) << words.error().to_string();
  Rng rng(123, Rng::stream_id({7, 3}));
  for (std::size_t i = 0; i < words->size(); ++i) ASSERT_EQ((*words)[i], rng.next_u32()) << i;
}

TEST_F(CudaKernels, WeightedVoteMatchesCpu) {
  std::vector<BitVector> inputs;
  std::vector<const BitVector*> pointers;
  for (int i = 0; i < 5; ++i) inputs.push_back(kernels::pack_signs(random_values(1000, 7 + i)));
  for (const auto& in : inputs) pointers.push_back(&in);
  const std::vector<std::uint32_t> weights{1, 5, 2, 0, 3};
  auto gpu = majority_vote_on_device(inputs, weights);
  ASSERT_TRUE(gpu.ok()) << gpu.error().to_string();
  BitVector cpu;
  kernels::weighted_majority_vote(pointers, weights, cpu);
  EXPECT_EQ(*gpu, cpu);
}

// The node's hot path: sizes at the edges of a word, of a warp's step (256 coordinates), of a
// block's share, and one that is no multiple of anything.
const std::size_t kHotPathSizes[] = {0, 1, 63, 64, 65, 255, 257, 1000, 4099, (1u << 20) + 3};

TEST_F(CudaKernels, FusedMomentumAndPackMatchCpu) {
  for (const double beta : {0.9, 0.0, 0.99}) {
    for (const std::size_t size : kHotPathSizes) {
      std::vector<float> momentum = random_values(size, 3 * size + 1), cpu_momentum = momentum;
      const auto gradient = random_values(size, 5 * size + 2);
      auto signs = momentum_pack_signs_on_device(momentum, gradient, momentum_factors(beta));
      ASSERT_TRUE(signs.ok()) << signs.error().to_string();
      kernels::signum_momentum(cpu_momentum, gradient, beta);
      EXPECT_EQ(momentum, cpu_momentum) << "beta " << beta << ", size " << size;
      EXPECT_EQ(*signs, kernels::pack_signs(cpu_momentum)) << "beta " << beta << ", size " << size;
    }
  }
}

// Against the update rules of learning/optimizer.h: the CPU replica's code, not a copy of it.
TEST_F(CudaKernels, SignUpdateFromAVoteMatchesTheCpuRule) {
  for (const std::size_t size : kHotPathSizes) {
    std::vector<float> params = random_values(size, size + 11), cpu = params;
    const BitVector vote = kernels::pack_signs(random_values(size, size + 12));
    const SgdFactors factors{0.01f, 1e-4f, 0.0f, 1.0f, false};
    ASSERT_TRUE(apply_update_on_device(params, &vote, {}, {}, factors, false).ok());
    learning::make_sign_update({1e-4})->step_vote(cpu, vote, learning::StepScale{0.01f, 1e-4f});
    EXPECT_EQ(params, cpu) << "size " << size;
  }
}

TEST_F(CudaKernels, SgdAndHeavyBallMatchTheCpuRulesOverSeveralSteps) {
  const learning::SgdOptions variants[] = {
      learning::kHeavyBallVoteOptions, {0.9, 5e-4, 0.1, true}, {0.0, 1e-3, 0.0, false}};
  for (const learning::SgdOptions& options : variants) {
    for (const bool from_vote : {true, false}) {
      for (const std::size_t size : {std::size_t{65}, std::size_t{4099}, (std::size_t{1} << 20) + 3}) {
        std::vector<float> params = random_values(size, size + 21), cpu = params, buffer(size, 0.0f);
        auto rule = learning::make_sgd(options);
        const SgdFactors factors{0.05f, static_cast<float>(options.weight_decay), static_cast<float>(options.momentum),
                                 static_cast<float>(1.0 - options.dampening), options.nesterov};
        for (int step = 0; step < 3; ++step) {
          const auto direction = random_values(size, 100 * size + step);
          const BitVector vote = kernels::pack_signs(direction);
          ASSERT_TRUE(apply_update_on_device(
                          params, from_vote ? &vote : nullptr, from_vote ? std::span<const float>{} : direction,
                          options.momentum != 0.0 ? std::span<float>(buffer) : std::span<float>{}, factors, step == 0)
                          .ok());
          if (from_vote) {
            rule->step_vote(cpu, vote, learning::StepScale{0.05f, factors.weight_decay});
          } else {
            rule->step(cpu, direction, learning::StepScale{0.05f, factors.weight_decay});
          }
          ASSERT_EQ(params, cpu) << "momentum " << options.momentum << ", vote " << from_vote << ", size " << size
                                 << ", step " << step;
        }
      }
    }
  }
}

// Buffers that are not 16-byte aligned (a torch view at an odd offset) take the scalar path and
// give the same bits.
TEST_F(CudaKernels, UpdateOfUnalignedBuffersMatchesCpu) {
  const std::size_t size = 4099;
  std::vector<float> params = random_values(size, 31), cpu = params, buffer(size, 0.5f), cpu_buffer = buffer;
  const auto direction = random_values(size, 32);
  float* raw = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&raw), 3 * (size + 1) * sizeof(float)), cudaSuccess);
  std::unique_ptr<float, decltype(&cudaFree)> owner(raw, &cudaFree);
  float* d_params = raw + 1;
  float* d_direction = raw + (size + 1) + 2;
  float* d_buffer = raw + 2 * (size + 1) + 1;
  ASSERT_EQ(cudaMemcpy(d_params, params.data(), size * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_direction, direction.data(), size * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_buffer, buffer.data(), size * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  const SgdFactors factors{0.1f, 1e-3f, 0.9f, 1.0f, false};
  ASSERT_TRUE(apply_update(d_params, nullptr, d_direction, d_buffer, size, factors, false, nullptr).ok());
  ASSERT_EQ(cudaMemcpy(params.data(), d_params, size * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(buffer.data(), d_buffer, size * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::size_t i = 0; i < size; ++i)
    kernels::momentum_sgd_step(cpu[i], cpu_buffer[i], direction[i], factors, false);
  EXPECT_EQ(params, cpu);
  EXPECT_EQ(buffer, cpu_buffer);
}

// Checked before any launch: needs no device.
TEST(CudaKernelsArguments, UpdateRefusesAmbiguousOrMissingInputs) {
  float* none = nullptr;
  const std::uint64_t* no_vote = nullptr;
  EXPECT_EQ(apply_update(none, no_vote, nullptr, nullptr, 10, {}, false, nullptr).error().code,
            ErrorCode::kInvalidArgument);
  const SgdFactors with_momentum{0.1f, 0.0f, 0.9f, 1.0f, false};
  float dummy = 0.0f;
  EXPECT_EQ(apply_update(none, nullptr, &dummy, nullptr, 10, with_momentum, false, nullptr).error().code,
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ballot::kernels::cuda
