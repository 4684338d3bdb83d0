#include "kernels/cuda/cuda_kernels.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"

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

}  // namespace
}  // namespace ballot::kernels::cuda
