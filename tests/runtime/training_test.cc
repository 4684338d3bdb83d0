#include "runtime/training.h"

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

TEST(TrainingOptions, ValidateNamesTheOption) {
  auto options = tiny_run();
  EXPECT_TRUE(options.validate().ok());
  options.byzantine = 3;
  EXPECT_NE(options.validate().error().message.find("b < n/2"), std::string::npos);
  options = tiny_run();
  options.lr = "linear:lr=1";
  EXPECT_FALSE(options.validate().ok());
  options = tiny_run();
  options.code = "deterministic:b=x";
  EXPECT_FALSE(make_training_setup(
                   options, std::make_shared<const learning::TrainTestSplit>(load_training_data(options).value()))
                   .ok());
  options = tiny_run();
  options.data = "imagenet";
  EXPECT_NE(load_training_data(options).error().message.find("unknown dataset"), std::string::npos);
  options = tiny_run();
  options.placement = Placement::kExchange;
  EXPECT_TRUE(options.validate().ok());
  options.rule = "median";  // the gradient path has no election code to relay through
  EXPECT_NE(options.validate().error().message.find("placement 'exchange'"), std::string::npos);
  // A codec only travels on the gradient path: with the vote it would be silently unused.
  options = tiny_run();
  options.codec = "qsgd:s=16";
  EXPECT_NE(options.validate().error().message.find("applies to the gradient path only"), std::string::npos);
  options.rule = "median";
  EXPECT_TRUE(options.validate().ok());
  options.codec = "qsgd:bogus=1";
  EXPECT_FALSE(options.validate().ok());
  // DGC corrects momentum at the node: a server rule with momentum would apply it twice.
  options.codec = "dgc:ratio=0.01";
  options.update = "sgd";
  EXPECT_TRUE(options.validate().ok());
  for (const char* update : {"sgd:momentum=0.9", "heavyball", "signum"}) {
    options.update = update;
    const auto status = options.validate();
    ASSERT_FALSE(status.ok()) << update;
    EXPECT_NE(status.error().message.find("momentum a second time"), std::string::npos) << update;
  }
  options.update = "heavyball:momentum=0";
  EXPECT_TRUE(options.validate().ok());
  options.update = "sgd:momentum=0.9";  // DGC without momentum correction: the server's is fine
  options.codec = "dgc:ratio=0.01,momentum=0";
  EXPECT_TRUE(options.validate().ok());
}

TEST(TrainingSetup, DeterministicCodeTakesTheFaultBudget) {
  auto setup = set_up(tiny_run());
  EXPECT_EQ(setup.code, coding::AllocationMatrix::deterministic(5, 1).value());
  auto options = tiny_run();
  options.attack = "reverse";
  options.attackers = 2;
  EXPECT_EQ(set_up(options).byzantine.size(), 2u);
}

// A node's vote is the majority over its partitions of the signs of their gradients.
// The transport limits of a run follow its model: the defaults for a small one; for 17 M
// parameters on the fp32 gradient path (68 MB votes, over the 64 MiB default) exactly its vote
// and decision, and on the vote path the defaults again (2.1 MB of signs).
TEST(TrainingSetup, FrameLimitsFollowTheModelAndCodec) {
  using transport::MessageType;
  const transport::FrameLimits defaults;
  EXPECT_EQ(frame_limits(set_up(tiny_run())).value().max_payload, defaults.max_payload);
  auto options = tiny_run();
  options.model = "synthetic:d=17000000";
  options.rule = "mean";
  options.codec = "fp32";
  const auto fp32 = frame_limits(set_up(options));
  ASSERT_TRUE(fp32.ok()) << fp32.error().to_string();
  const std::size_t d = 17'000'000;
  const std::size_t wire = coding::make_codec("fp32").value()->wire_size(d);  // 4d and the codec's header
  EXPECT_EQ(fp32->limit(MessageType::kVote), round_frame_limits(d, wire, false, 5).limit(MessageType::kVote));
  EXPECT_GT(fp32->limit(MessageType::kVote), 4 * d);
  EXPECT_EQ(fp32->limit(MessageType::kDecision), decision_bytes(d, false));
  options.rule = "vote";
  options.codec = "fp32";
  EXPECT_EQ(frame_limits(set_up(options)).value().max_payload, defaults.max_payload);
}

TEST(TrainingOptions, DigestEveryMustBePositive) {
  auto options = tiny_run();
  options.digest_every = 0;
  EXPECT_NE(options.validate().error().message.find("digest_every"), std::string::npos);
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
