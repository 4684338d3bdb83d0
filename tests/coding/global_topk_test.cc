#include "coding/global_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "codec_test_util.h"

namespace ballot::coding {
namespace {

using testing::normal_values;

TEST(GlobalTopK, AggregatorKeepsTheKLargestOfTheSumAndWorkersKeepTheRest) {
  const auto layout = GradientLayout::whole(400);
  const SparseOptions budget{.k = 20};
  constexpr int kWorkers = 3;
  std::vector<GlobalTopKCodec> workers(kWorkers, GlobalTopKCodec(budget));
  std::vector<std::vector<float>> grads;
  std::vector<EncodedGradient> messages;
  Rng rng(1);
  for (int w = 0; w < kWorkers; ++w) {
    grads.push_back(normal_values(400, 10 + w));
    messages.push_back(workers[w].encode(grads.back(), layout, rng));
    EXPECT_EQ(messages.back().size(), 24u + 4u + 8u * 20u);
  }
  std::vector<std::span<const std::uint8_t>> views;
  for (const auto& m : messages) views.push_back(m.bytes);
  const auto global = global_topk_reduce(views, layout, GlobalTopKReduceOptions{.budget = budget});
  ASSERT_TRUE(global.ok()) << global.error().to_string();

  // Reference: sum of the local top-k messages, then its top-k by magnitude.
  std::vector<float> sum(400, 0.0f);
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(workers[w].decode_add(messages[w].bytes, layout, sum).ok());
  std::vector<std::size_t> order(400);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(sum[a]) > std::fabs(sum[b]); });
  std::vector<float> expected(400, 0.0f);
  for (std::size_t j = 0; j < 20; ++j) expected[order[j]] = sum[order[j]];
  const auto decoded = workers[0].decode(global->bytes, layout).value();
  EXPECT_EQ(decoded, expected);

  // Each worker: what it sent and was chosen globally is gone from the residual, everything else
  // (unsent, or sent but not chosen) is still there — nothing is lost.
  for (int w = 0; w < kWorkers; ++w) {
    const auto sent = workers[w].decode(messages[w].bytes, layout).value();
    ASSERT_TRUE(workers[w].accept_global(global->bytes, layout).ok());
    for (std::size_t i = 0; i < 400; ++i) {
      const float applied = expected[i] != 0.0f ? sent[i] : 0.0f;
      ASSERT_FLOAT_EQ(workers[w].residual()[i] + applied, grads[w][i]) << "worker " << w << " i " << i;
    }
  }
}

TEST(GlobalTopK, AverageDividesByTheNumberOfMessages) {
  const auto layout = GradientLayout::whole(50);
  GlobalTopKCodec worker(SparseOptions{.k = 5});
  Rng rng(1);
  const auto message = worker.encode(normal_values(50, 3), layout, rng);
  const std::vector<std::span<const std::uint8_t>> twice{message.bytes, message.bytes};
  const auto sum = global_topk_reduce(twice, layout, {.budget = {.k = 5}, .average = false}).value();
  const auto mean = global_topk_reduce(twice, layout, {.budget = {.k = 5}, .average = true}).value();
  const auto a = worker.decode(sum.bytes, layout).value();
  const auto b = worker.decode(mean.bytes, layout).value();
  const auto once = worker.decode(message.bytes, layout).value();
  for (std::size_t i = 0; i < 50; ++i) {
    EXPECT_FLOAT_EQ(a[i], 2 * once[i]);
    EXPECT_FLOAT_EQ(b[i], once[i]);
  }
}

TEST(GlobalTopK, ReduceNamesTheBadMessage) {
  const auto layout = GradientLayout::whole(50);
  GlobalTopKCodec worker(SparseOptions{.k = 5});
  Rng rng(1);
  const auto good = worker.encode(normal_values(50, 3), layout, rng);
  auto bad = good.bytes;
  bad.pop_back();
  const std::vector<std::span<const std::uint8_t>> messages{good.bytes, bad};
  const auto result = global_topk_reduce(messages, layout, {.budget = {.k = 5}});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("message 1"), std::string::npos);
  // accept_global() wants the aggregator's message, not a worker's.
  EXPECT_FALSE(worker.accept_global(good.bytes, layout).ok());
}

}  // namespace
}  // namespace ballot::coding
