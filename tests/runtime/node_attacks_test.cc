#include "runtime/node_attacks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

using testing::setup_for;
using transport::MessageType;

TrainingOptions options_with(const char* attack) {
  TrainingOptions options = testing::small_synthetic_run(5, "bernoulli:r=3", 4, 0);
  options.attack = attack;
  options.attackers = 1;
  options.attacker_choice = "0";  // node 0 attacks
  return options;
}

// Counts what an adversary sends; sealing is not expected in these attacks.
class CountingLink final : public NodeAdversary::Link {
 public:
  transport::OutboundFrame seal(MessageType type, std::uint64_t, std::vector<std::uint8_t> payload) override {
    ++sealed;
    return transport::make_unsigned_frame(type, std::make_shared<const std::vector<std::uint8_t>>(std::move(payload)));
  }
  Status send(transport::NodeId to, transport::OutboundFrame) override {
    sent_to.push_back(to);
    slept_before_send.push_back(slept);
    return {};
  }
  void sleep_for(std::chrono::milliseconds duration) override { slept += duration; }
  int sealed = 0;
  std::vector<transport::NodeId> sent_to;
  std::chrono::milliseconds slept{0};
  std::vector<std::chrono::milliseconds> slept_before_send;
};

transport::OutboundFrame honest_frame(const std::vector<std::uint8_t>& payload) {
  return transport::make_unsigned_frame(MessageType::kVote, std::make_shared<const std::vector<std::uint8_t>>(payload));
}

TEST(NodeAdversary, OnlyByzantineNodesGetOne) {
  auto setup = setup_for(options_with("reverse"));
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  ASSERT_EQ(setup->byzantine, std::vector<std::size_t>{0});
  EXPECT_NE(make_node_adversary(*setup, 0, *replica, nullptr), nullptr);
  for (std::size_t node = 1; node < 5; ++node) EXPECT_EQ(make_node_adversary(*setup, node, *replica, nullptr), nullptr);
}

TEST(NodeAdversary, TheHonestDefaultSendsTheHonestFrameToEveryReceiver) {
  NodeAdversary honest;
  CountingLink link;
  const std::vector<std::uint8_t> payload{1, 2, 3};
  auto went = honest.deliver(MessageType::kVote, 3, 1000, payload, honest_frame(payload), {0, 2, 5}, link);
  ASSERT_TRUE(went.ok());
  EXPECT_TRUE(*went);
  EXPECT_EQ(link.sent_to, (std::vector<transport::NodeId>{0, 2, 5}));
  EXPECT_EQ(honest.silence(3), NodeAdversary::Silence::kNone);
}

TEST(SpecAdversary, ReverseFlipsTheComputedVoteAndSendsIt) {
  auto setup = setup_for(options_with("reverse"));
  ASSERT_TRUE(setup.ok());
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  NodeWorker worker(*setup, 0);
  BitVector vote;
  worker.vote(*replica, 0, vote);
  BitVector attacked = vote;
  SpecAdversary adversary(*setup, 0, *replica, nullptr);
  adversary.replace(MessageType::kVote, {0, nullptr, &attacked, nullptr});
  BitVector flipped = vote;
  flipped.flip();
  EXPECT_EQ(attacked, flipped);
  EXPECT_EQ(adversary.silence(0), NodeAdversary::Silence::kNone);
  CountingLink link;
  const std::vector<std::uint8_t> payload{9};
  auto went = adversary.deliver(MessageType::kVote, 0, 1000, payload, honest_frame(payload), {0}, link);
  ASSERT_TRUE(went.ok());
  EXPECT_TRUE(*went);  // a content attack sends its (replaced) vote normally
  EXPECT_EQ(link.sent_to.size(), 1u);
}

TEST(SpecAdversary, CrashSilencesTheNodeForGoodOrForItsRounds) {
  auto setup = setup_for(options_with("crash"));
  ASSERT_TRUE(setup.ok());
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  SpecAdversary forever(*setup, 0, *replica, nullptr);
  EXPECT_EQ(forever.silence(0), NodeAdversary::Silence::kForever);

  auto limited = setup_for(options_with("crash:from=1,until=2"));
  ASSERT_TRUE(limited.ok()) << limited.error().to_string();
  auto limited_replica = Replica::create(*limited);
  ASSERT_TRUE(limited_replica.ok());
  SpecAdversary comes_back(*limited, 0, *limited_replica, nullptr);
  EXPECT_EQ(comes_back.silence(0), NodeAdversary::Silence::kNone);
  EXPECT_EQ(comes_back.silence(1), NodeAdversary::Silence::kRound);
}

TEST(SpecAdversary, OmissionWithholdsTheVoteAndWrongDigestSpoilsTheClaim) {
  auto setup = setup_for(options_with("omission:p=1"));
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  SpecAdversary omits(*setup, 0, *replica, nullptr);
  CountingLink link;
  const std::vector<std::uint8_t> payload{9};
  auto went = omits.deliver(MessageType::kVote, 1, 1000, payload, honest_frame(payload), {0}, link);
  ASSERT_TRUE(went.ok());
  EXPECT_FALSE(*went);
  EXPECT_TRUE(link.sent_to.empty());

  auto wrong = setup_for(options_with("wrong_digest"));
  ASSERT_TRUE(wrong.ok());
  auto wrong_replica = Replica::create(*wrong);
  ASSERT_TRUE(wrong_replica.ok());
  SpecAdversary spoils(*wrong, 0, *wrong_replica, nullptr);
  transport::Digest digest = wrong_replica->digest();
  const transport::Digest honest_digest = digest;
  spoils.replace(MessageType::kVote, {0, &digest, nullptr, nullptr});
  EXPECT_NE(digest, honest_digest);
}

// The delay attack waits on the session's clock (real time in a cluster, virtual time in the
// lockstep engine), then sends the honest vote.
TEST(SpecAdversary, DelayWaitsOnTheLinksClockThenSends) {
  for (const auto& [spec, expected] : {std::pair{"delay", std::chrono::milliseconds(2000)},
                                       std::pair{"delay:ms=250", std::chrono::milliseconds(250)}}) {
    auto setup = setup_for(options_with(spec));
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    auto replica = Replica::create(*setup);
    ASSERT_TRUE(replica.ok());
    SpecAdversary delays(*setup, 0, *replica, nullptr);
    CountingLink link;
    const std::vector<std::uint8_t> payload{9};
    auto went = delays.deliver(MessageType::kVote, 1, 1000, payload, honest_frame(payload), {0}, link);
    ASSERT_TRUE(went.ok());
    EXPECT_TRUE(*went) << spec;
    ASSERT_EQ(link.slept_before_send.size(), 1u);
    EXPECT_EQ(link.slept_before_send[0], expected) << spec;
  }
}

}  // namespace
}  // namespace ballot::runtime
