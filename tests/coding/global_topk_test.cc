#include "coding/global_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

// A NaN gradient entry is sent in its round; when the global set leaves it out (here: the set of
// another worker's clean message) it does not go back into the residual, where it would be the
// largest entry and make every later message non-finite.
TEST(GlobalTopK, ANonFiniteEntryLeftOutOfTheGlobalSetIsNotKept) {
  const auto layout = GradientLayout::whole(100);
  const SparseOptions budget{.k = 5};
  GlobalTopKCodec poisoned(budget), clean(budget);
  Rng rng(2);
  auto g = normal_values(100, 3);
  g[7] = std::numeric_limits<float>::quiet_NaN();
  const auto sent = poisoned.encode(g, layout, rng);
  EXPECT_TRUE(std::isnan(poisoned.decode(sent.bytes, layout).value()[7]));
  const auto other = clean.encode(normal_values(100, 4), layout, rng);
  const std::vector<std::span<const std::uint8_t>> views{other.bytes};
  const auto global = global_topk_reduce(views, layout, GlobalTopKReduceOptions{.budget = budget});
  ASSERT_TRUE(global.ok());
  ASSERT_TRUE(poisoned.accept_global(global->bytes, layout).ok());
  for (const float r : poisoned.residual()) ASSERT_TRUE(std::isfinite(r));
  const auto next = poisoned.decode(poisoned.encode(normal_values(100, 5), layout, rng).bytes, layout).value();
  for (const float v : next) ASSERT_TRUE(std::isfinite(v));
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

// The robust-rule side: the k largest |value| of each segment stay, everything else becomes +0;
// ties go to the lowest index and NaN counts as +inf, as in the workers' selection.
TEST(GlobalTopK, KeepGlobalTopKKeepsTheKLargestOfEachSegment) {
  const auto layout = GradientLayout::from_sizes({{"a", 6}, {"b", 4}}).value();
  const float nan = std::nanf("");
  const std::vector<float> aggregate{0.5f, -3.0f, 2.0f, -2.0f, 0.1f, 1.0f, nan, 0.0f, -0.25f, 0.25f};
  {  // whole model, k = 4: NaN, -3, then the tie 2 / -2 (both in), nothing else
    std::vector<float> x = aggregate;
    keep_global_top_k(x, layout, SparseOptions{.k = 4});
    EXPECT_TRUE(std::isnan(x[6]));
    const std::vector<float> rest{x[0], x[1], x[2], x[3], x[4], x[5], x[7], x[8], x[9]};
    EXPECT_EQ(rest, (std::vector<float>{0.0f, -3.0f, 2.0f, -2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}));
    for (float v : rest) EXPECT_FALSE(std::signbit(v) && v == 0.0f);  // +0, never -0
  }
  {  // per layer, ratio 0.3: 2 of "a" (-3, then 2 before -2: the lower index), 2 of "b" (NaN, then
     // -0.25 before 0.25)
    std::vector<float> x = aggregate;
    keep_global_top_k(x, layout, SparseOptions{.ratio = 0.3, .granularity = Granularity::kLayer});
    EXPECT_EQ(std::vector<float>(x.begin(), x.begin() + 6), (std::vector<float>{0.0f, -3.0f, 2.0f, 0.0f, 0.0f, 0.0f}));
    EXPECT_TRUE(std::isnan(x[6]));
    EXPECT_EQ(std::vector<float>(x.begin() + 7, x.end()), (std::vector<float>{0.0f, -0.25f, 0.0f}));
  }
}

// A decision's global set is every coordinate it changes: the worker gets back what it sent
// anywhere else, including a selected coordinate whose aggregate was 0 (nothing applied there).
TEST(GlobalTopK, GlobalSetOfADecisionReturnsWhatItDidNotApply) {
  const auto layout = GradientLayout::from_sizes({{"a", 300}, {"b", 100}}).value();
  constexpr int kWorkers = 5;
  const SparseOptions budget{.ratio = 0.1, .granularity = Granularity::kLayer};
  std::vector<GlobalTopKCodec> workers(kWorkers, GlobalTopKCodec(budget));
  std::vector<std::vector<float>> sent;
  std::vector<float> aggregate(400, 0.0f);  // a stand-in for a robust rule: the mean of the decoded
  Rng rng(1);
  for (int w = 0; w < kWorkers; ++w) {
    const auto message = workers[w].encode(normal_values(400, 20 + w), layout, rng);
    sent.push_back(workers[w].decode(message.bytes, layout).value());
    for (std::size_t i = 0; i < 400; ++i) aggregate[i] += sent.back()[i] / kWorkers;
  }
  keep_global_top_k(aggregate, layout, budget);
  // As if the rule had returned 0 at a coordinate of the global set: nothing is applied there.
  *std::find_if(aggregate.begin(), aggregate.end(), [](float v) { return v != 0.0f; }) = 0.0f;
  const auto global = global_set_of(aggregate, layout, Granularity::kLayer);
  const auto decoded = workers[0].decode(global.bytes, layout).value();
  EXPECT_EQ(decoded, aggregate);
  std::size_t chosen = 0;
  for (float v : aggregate) chosen += v != 0.0f;
  EXPECT_EQ(global.size(), 24u + 2 * 4u + 8u * chosen);
  EXPECT_LE(chosen, 40u);

  for (int w = 0; w < kWorkers; ++w) {
    const std::vector<float> before(workers[w].residual().begin(), workers[w].residual().end());
    ASSERT_TRUE(workers[w].accept_global(global.bytes, layout).ok());
    for (std::size_t i = 0; i < 400; ++i) {
      const float back = aggregate[i] != 0.0f ? 0.0f : sent[w][i];
      ASSERT_EQ(workers[w].residual()[i], before[i] + back) << "worker " << w << " i " << i;
    }
  }
  // −0 is not applied (it is skipped like +0) and NaN is, in every segment.
  std::vector<float> signed_zeros(400, 0.0f);
  signed_zeros[3] = -0.0f;
  signed_zeros[5] = 2.0f;
  signed_zeros[299] = std::numeric_limits<float>::quiet_NaN();
  signed_zeros[300] = -0.0f;
  signed_zeros[399] = -1.0f;
  const auto set = global_set_of(signed_zeros, layout, Granularity::kLayer);
  EXPECT_EQ(set.size(), 24u + 2 * 4u + 8u * 3);
  const auto back = workers[0].decode(set.bytes, layout).value();
  for (std::size_t i = 0; i < 400; ++i) {
    if (i == 299) {
      EXPECT_TRUE(std::isnan(back[i]));
    } else {
      EXPECT_EQ(back[i], signed_zeros[i]) << i;
    }
  }
  const auto whole = global_set_of(signed_zeros, layout, Granularity::kModel);
  EXPECT_EQ(whole.size(), 24u + 4u + 8u * 3);

  // An empty decision (every coordinate 0) is a valid global set that takes nothing: all that was
  // sent goes back. A dropped selection puts nothing back.
  const auto none = global_set_of(std::vector<float>(400, 0.0f), layout, Granularity::kModel);
  EXPECT_EQ(none.size(), 24u + 4u);
  for (int w : {0, 1}) {
    const auto gradient = normal_values(400, 40 + w);
    const auto message = workers[w].encode(gradient, layout, rng);
    const auto values = workers[w].decode(message.bytes, layout).value();
    const std::vector<float> before(workers[w].residual().begin(), workers[w].residual().end());
    if (w == 1) workers[w].drop_selection();
    ASSERT_TRUE(workers[w].accept_global(none.bytes, layout).ok());
    for (std::size_t i = 0; i < 400; ++i) {
      ASSERT_EQ(workers[w].residual()[i], before[i] + (w == 0 ? values[i] : 0.0f)) << "worker " << w << " i " << i;
    }
  }
}

// From the update's entries (a sparse decision's list) the global set is the one the scan over d
// finds: −0 and +0 left out, NaN kept, every segment of both granularities.
TEST(GlobalTopK, GlobalSetOfListedEntriesIsTheScansSet) {
  const auto layout = GradientLayout::from_sizes({{"a", 70}, {"b", 1}, {"c", 200}, {"d", 129}}).value();
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed);
    std::vector<float> applied(400, 0.0f);
    SparseGradient listed;
    for (std::uint32_t i = 0; i < 400; ++i) {
      const std::uint32_t pick = rng.next_u32() % 8;
      if (pick > 3) continue;
      // Listed: a value, −0, NaN, or +0 (entries may list coordinates whose value is +0).
      applied[i] = pick == 0   ? -0.0f
                   : pick == 1 ? std::numeric_limits<float>::quiet_NaN()
                   : pick == 2 ? 0.0f
                               : rng.uniform_float() - 0.5f;
      listed.indices.push_back(i);
      listed.values.push_back(applied[i]);
    }
    for (const auto granularity : {Granularity::kModel, Granularity::kLayer}) {
      EXPECT_EQ(global_set_of(listed, layout, granularity).bytes, global_set_of(applied, layout, granularity).bytes)
          << "seed " << seed;
    }
  }
  const std::vector<float> zeros(400, 0.0f);
  EXPECT_EQ(global_set_of(SparseGradient{}, layout, Granularity::kLayer).bytes,
            global_set_of(zeros, layout, Granularity::kLayer).bytes);
}

}  // namespace
}  // namespace ballot::coding
