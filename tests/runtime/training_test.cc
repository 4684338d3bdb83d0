#include "runtime/training.h"

#include <gtest/gtest.h>

#include "coding/election_encoder.h"
#include "kernels/sign_kernels.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

TrainingOptions small() {
  TrainingOptions options;
  options.nodes = 5;
  options.byzantine = 1;
  options.model = "mlp:hidden=8";
  options.data = "synthetic:examples=500,features=12,classes=3";
  options.worker_momentum = 0;
  options.partition_size = 8;
  return options;
}

TrainingSetup make(const TrainingOptions& options) { return testing::setup_for(options).value(); }

TEST(TrainingOptions, ValidateNamesTheOption) {
  auto options = small();
  EXPECT_TRUE(options.validate().ok());
  options.byzantine = 3;
  EXPECT_NE(options.validate().error().message.find("b < n/2"), std::string::npos);
  options = small();
  options.lr = "linear:lr=1";
  EXPECT_FALSE(options.validate().ok());
  options = small();
  options.code = "deterministic:b=x";
  EXPECT_FALSE(
      make_training_setup(options, std::make_shared<const TrainTestSplit>(load_training_data(options).value())).ok());
  options = small();
  options.data = "imagenet";
  EXPECT_NE(load_training_data(options).error().message.find("unknown dataset"), std::string::npos);
  options = small();
  options.placement = Placement::kExchange;
  EXPECT_TRUE(options.validate().ok());
  options.rule = "median";  // the gradient path has no election code to relay through
  EXPECT_NE(options.validate().error().message.find("placement 'exchange'"), std::string::npos);
  // A codec only travels on the gradient path: with the vote it would be silently unused.
  options = small();
  options.codec = "qsgd:s=16";
  EXPECT_NE(options.validate().error().message.find("applies to the gradient path only"), std::string::npos);
  options.rule = "median";
  EXPECT_TRUE(options.validate().ok());
  options.codec = "qsgd:bogus=1";
  EXPECT_FALSE(options.validate().ok());
}

TEST(TrainingSetup, DeterministicCodeTakesTheFaultBudget) {
  auto setup = make(small());
  EXPECT_EQ(setup.code, coding::AllocationMatrix::deterministic(5, 1).value());
  auto options = small();
  options.attack = "reverse";
  options.attackers = 2;
  EXPECT_EQ(make(options).byzantine.size(), 2u);
}

// A node's vote is the majority over its partitions of the signs of their gradients.
TEST(NodeWorker, VoteIsTheElectionOfItsPartitionSigns) {
  auto setup = make(small());
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  for (std::size_t node = 0; node < setup.options.nodes; ++node) {
    NodeWorker worker(setup, node);
    BitVector vote;
    worker.vote(replica, 3, vote);
    std::vector<BitVector> signs(setup.options.nodes, BitVector(d));
    for (std::uint32_t j = 0; j < setup.options.nodes; ++j) {
      Batch batch = gather(setup.data->train, setup.sampler.indices(3, j));
      replica.model().forward_backward(batch.features, batch.labels);
      signs[j] = kernels::pack_signs(replica.model().gradients());
    }
    BitVector expected;
    coding::encode_replicated(setup.code, node, signs, expected);
    EXPECT_EQ(vote, expected) << "node " << node;
  }
}

// Exchange placement: a node computes (and keeps the momentum of) its own partition only.
TEST(NodeWorker, ExchangePlacementComputesOnlyTheOwnPartition) {
  auto options = small();
  auto replicated = make(options);
  options.placement = Placement::kExchange;
  auto exchange = make(options);
  for (std::size_t node = 0; node < options.nodes; ++node) {
    EXPECT_EQ(NodeWorker(exchange, node).partitions(), std::vector<std::uint32_t>{static_cast<std::uint32_t>(node)});
    EXPECT_EQ(NodeWorker(replicated, node).partitions(), replicated.code.row(node));
  }
}

TEST(Replica, CheckpointRoundTripAndValidation) {
  auto setup = make(small());
  auto replica = Replica::create(setup).value();
  replica.apply(0, BitVector(replica.dimension(), true));
  Checkpoint checkpoint;
  replica.save_to(checkpoint);
  auto other = Replica::create(setup).value();
  EXPECT_NE(other.digest(), replica.digest());
  ASSERT_TRUE(other.restore_from(checkpoint).ok());
  EXPECT_EQ(other.digest(), replica.digest());

  checkpoint.sections["model"].pop_back();
  EXPECT_EQ(other.restore_from(checkpoint).error().code, ErrorCode::kMalformed);
  checkpoint.sections.erase("optimizer");
  EXPECT_FALSE(other.restore_from(checkpoint).ok());
}

TEST(Decide, MajorityWithTiesToPlusOneAndEmptyIsPlusOne) {
  BitVector plus(70, true), minus(70, false);
  std::vector<const BitVector*> votes{&plus, &minus};
  EXPECT_EQ(decide(votes, 70).count_ones(), 70u);
  votes.push_back(&minus);
  EXPECT_EQ(decide(votes, 70).count_ones(), 0u);
  EXPECT_EQ(decide({}, 70).count_ones(), 70u);
}

TEST(Placements, TheTableParsesAndNamesEveryPlacement) {
  const auto table = placement_table();
  ASSERT_EQ(table.size(), 2u);
  for (const auto& entry : table) {
    EXPECT_EQ(parse_placement(entry.name).value(), entry.make);
    EXPECT_EQ(placement_name(entry.make), entry.name);
    EXPECT_EQ(parse_placement(entry.example).value(), entry.make);
    EXPECT_FALSE(entry.summary.empty());
  }
  const auto unknown = parse_placement("everywhere");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("known: replicated, exchange"), std::string::npos) << unknown.error().message;
}

}  // namespace
}  // namespace ballot::runtime
