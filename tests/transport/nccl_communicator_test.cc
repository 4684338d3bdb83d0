#include "transport/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace ballot::transport {
namespace {

bool have_gpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

TEST(NcclCommunicator, RejectsBadRank) {
  NcclUniqueId id{};
  EXPECT_EQ(NcclCommunicator::create(2, 2, id, 0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(NcclCommunicator::create(0, 0, id, 0).error().code, ErrorCode::kInvalidArgument);
}

// One rank on one GPU: allgather is a copy, allreduce the identity; checks the wiring end to end.
TEST(NcclCommunicator, SingleRankCollectives) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto id = NcclCommunicator::unique_id();
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  auto comm = NcclCommunicator::create(0, 1, *id, 0);
  ASSERT_TRUE(comm.ok()) << comm.error().to_string();
  const std::vector<std::uint64_t> signs{0x0123456789abcdefull, ~0ull, 0, 42};
  std::uint64_t* d_signs = nullptr;
  std::uint64_t* d_gathered = nullptr;
  ASSERT_EQ(cudaMalloc(&d_signs, signs.size() * 8), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_gathered, signs.size() * 8), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_signs, signs.data(), signs.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE((*comm)->allgather_signs(d_signs, signs.size(), d_gathered, nullptr).ok());
  std::vector<std::uint64_t> gathered(signs.size());
  ASSERT_EQ(cudaMemcpy(gathered.data(), d_gathered, signs.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(gathered, signs);

  const std::vector<std::int32_t> counts{-3, 0, 7};
  std::int32_t* d_counts = nullptr;
  std::int32_t* d_sum = nullptr;
  ASSERT_EQ(cudaMalloc(&d_counts, counts.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_sum, counts.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_counts, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE((*comm)->allreduce_counts(d_counts, d_sum, counts.size(), nullptr).ok());
  std::vector<std::int32_t> sum(counts.size());
  ASSERT_EQ(cudaMemcpy(sum.data(), d_sum, counts.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sum, counts);
  cudaFree(d_signs);
  cudaFree(d_gathered);
  cudaFree(d_counts);
  cudaFree(d_sum);
}

}  // namespace
}  // namespace ballot::transport
