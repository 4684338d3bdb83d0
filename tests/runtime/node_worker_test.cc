#include "runtime/node_worker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "coding/codec_registry.h"
#include "coding/election_encoder.h"
#include "core/byte_io.h"
#include "kernels/sign_kernels.h"
#include "runtime/messages.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

using testing::set_up;
using testing::tiny_run;

TEST(NodeWorker, VoteIsTheElectionOfItsPartitionSigns) {
  auto setup = set_up(tiny_run());
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  for (std::size_t node = 0; node < setup.options.nodes; ++node) {
    NodeWorker worker(setup, node);
    BitVector vote;
    worker.vote(replica, 3, vote);
    std::vector<BitVector> signs(setup.options.nodes, BitVector(d));
    for (std::uint32_t j = 0; j < setup.options.nodes; ++j) {
      learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(3, j));
      replica.model().forward_backward(batch.features, batch.labels);
      signs[j] = kernels::pack_signs(replica.model().gradients());
    }
    BitVector expected;
    coding::encode_replicated(setup.code, node, signs, expected);
    EXPECT_EQ(vote, expected) << "node " << node;
  }
}

// A driver that runs the worker momentum and the packing elsewhere (on a GPU) hands the node its
// signs and, for the state file, its momentum: the vote and the saved state are fold's.
// A run with worker momentum 0.9, as the drivers that fold elsewhere have.
TrainingSetup with_momentum() {
  auto options = tiny_run();
  options.worker_momentum = 0.9;
  return set_up(options);
}

TEST(NodeWorker, SignsAndMomentumFromElsewhereGiveFoldsVoteAndState) {
  auto setup = with_momentum();
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  const std::uint32_t node = 1;
  NodeWorker folding(setup, node), handed(setup, node);
  std::map<std::uint32_t, learning::WorkerMomentum> elsewhere;
  for (std::uint64_t round = 0; round < 3; ++round) {
    for (const std::uint32_t j : folding.partitions()) {
      learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(round, j));
      replica.model().forward_backward(batch.features, batch.labels);
      const auto gradient = replica.model().gradients();
      ASSERT_TRUE(folding.fold(j, gradient).ok());
      BitVector signs;
      elsewhere.try_emplace(j, setup.options.worker_momentum).first->second.update(gradient, signs);
      ASSERT_TRUE(handed.fold_signs(j, d, signs.words()).ok());
    }
    BitVector a, b;
    folding.folded_vote(d, a);
    handed.folded_vote(d, b);
    EXPECT_EQ(a, b) << "round " << round;
  }
  for (const std::uint32_t j : folding.partitions()) {
    ASSERT_NE(handed.momentum(j), nullptr);
    EXPECT_TRUE(handed.momentum(j)->momentum().empty());  // never folded here
    ASSERT_TRUE(handed.set_momentum(j, elsewhere.at(j).momentum(), d).ok());
    ASSERT_NE(folding.momentum(j), nullptr);
    EXPECT_TRUE(std::ranges::equal(folding.momentum(j)->momentum(), handed.momentum(j)->momentum()));
  }
  EXPECT_EQ(handed.save_state(), folding.save_state());

  // Refused: a partition of another row, signs of another size or with padding bits set, a
  // momentum of another size or of a partition this node does not keep.
  std::uint32_t other = 0;
  while (std::ranges::find(folding.partitions(), other) != folding.partitions().end()) ++other;
  const BitVector ones(d, true);
  const auto words = ones.words();
  EXPECT_EQ(handed.fold_signs(other, d, words).error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(handed.fold_signs(folding.partitions()[0], d + 64, words).ok());
  std::vector<std::uint64_t> padded(words.begin(), words.end());
  if (d % 64 != 0) {
    padded.back() = ~std::uint64_t{0};
    EXPECT_EQ(handed.fold_signs(folding.partitions()[0], d, padded).error().code, ErrorCode::kMalformed);
  }
  const std::vector<float> short_momentum(d - 1, 0.0f);
  EXPECT_EQ(handed.set_momentum(folding.partitions()[0], short_momentum, d).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(handed.momentum(other), nullptr);
  EXPECT_FALSE(handed.set_momentum(other, std::vector<float>(d), d).ok());
  // Without worker momentum there is none to hand back.
  auto plain = set_up(tiny_run());
  EXPECT_EQ(NodeWorker(plain, node).momentum(folding.partitions()[0]), nullptr);
}

// A driver packing pieces of the signs itself (a vote in pieces on a GPU) hands them over word
// range by word range: the vote is the whole signs' vote.
TEST(NodeWorker, SignsInPiecesFromElsewhereGiveTheSameVote) {
  auto setup = with_momentum();
  auto replica = Replica::create(setup).value();
  const std::size_t words = BitVector::words_for(replica.dimension());
  const std::size_t d = replica.dimension();
  ASSERT_GE(words, 3u);
  const std::uint32_t node = 1;
  NodeWorker folding(setup, node), pieces(setup, node);
  for (const std::uint32_t j : folding.partitions()) {
    learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(0, j));
    replica.model().forward_backward(batch.features, batch.labels);
    ASSERT_TRUE(folding.fold(j, replica.model().gradients()).ok());
    const auto signs = folding.folded_signs(j).words();
    // The last piece first: the order of the pieces does not matter.
    const std::size_t cut = words / 3, cut2 = 2 * words / 3;
    ASSERT_TRUE(pieces.fold_signs_range(j, d, cut2, signs.subspan(cut2)).ok());
    ASSERT_TRUE(pieces.fold_signs_range(j, d, 0, signs.subspan(0, cut)).ok());
    ASSERT_TRUE(pieces.fold_signs_range(j, d, cut, signs.subspan(cut, cut2 - cut)).ok());
    EXPECT_EQ(pieces.folded_signs(j), folding.folded_signs(j));
  }
  BitVector a, b;
  folding.folded_vote(d, a);
  pieces.folded_vote(d, b);
  EXPECT_EQ(a, b);

  // Refused: another row's partition, words past the end, padding bits set in the last word.
  std::uint32_t other = 0;
  while (std::ranges::find(folding.partitions(), other) != folding.partitions().end()) ++other;
  const std::vector<std::uint64_t> two(2, 0);
  EXPECT_EQ(pieces.fold_signs_range(other, d, 0, two).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pieces.fold_signs_range(folding.partitions()[0], d, words - 1, two).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(pieces.fold_signs_range(folding.partitions()[0], d, words + 1, {}).ok());
  if (d % 64 != 0) {
    const std::vector<std::uint64_t> padded(1, ~std::uint64_t{0});
    EXPECT_EQ(pieces.fold_signs_range(folding.partitions()[0], d, words - 1, padded).error().code,
              ErrorCode::kInvalidArgument);
  }
}

// Exchange placement: a node computes (and keeps the momentum of) its own partition only.
TEST(NodeWorker, ExchangePlacementComputesOnlyTheOwnPartition) {
  auto options = tiny_run();
  auto replicated = set_up(options);
  options.placement = Placement::kExchange;
  auto exchange = set_up(options);
  for (std::size_t node = 0; node < options.nodes; ++node) {
    EXPECT_EQ(NodeWorker(exchange, node).partitions(), std::vector<std::uint32_t>{static_cast<std::uint32_t>(node)});
    EXPECT_EQ(NodeWorker(replicated, node).partitions(), replicated.code.row(node));
  }
}

}  // namespace
}  // namespace ballot::runtime
