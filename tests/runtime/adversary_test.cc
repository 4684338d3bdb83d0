#include "runtime/adversary.h"

#include <gtest/gtest.h>

#include <thread>

#include "attacks/election_attack.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

TrainingOptions options_with(const char* attack, std::size_t attackers) {
  TrainingOptions options;
  options.nodes = 7;
  options.byzantine = 1;
  options.code = "bernoulli:r=3";
  options.model = "mlp:hidden=8";
  options.data = "synthetic:examples=500,features=12,classes=3";
  options.partition_size = 8;
  options.rounds = 5;
  options.attack = attack;
  options.attackers = attackers;
  return options;
}

using testing::setup_for;

// The view an attacker recomputes is bit for bit what every node computes for itself.
TEST(HonestView, EqualsWhatEachNodeComputes) {
  auto setup = setup_for(options_with("none", 0));
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  HonestView view(*setup);
  std::vector<NodeWorker> workers;
  for (std::size_t i = 0; i < 7; ++i) workers.emplace_back(*setup, i);
  for (std::uint64_t round = 0; round < 3; ++round) {
    const RoundView& seen = view.compute(*replica, round);
    BitVector vote;
    for (std::size_t i = 0; i < 7; ++i) {
      const double loss = workers[i].vote(*replica, round, vote);
      EXPECT_EQ(vote, seen.honest_votes[i]) << "node " << i << " round " << round;
      EXPECT_DOUBLE_EQ(loss, seen.losses[i]);
    }
    replica->apply(round, seen.honest_votes[0]);  // any decision; all replicas apply the same
  }
}

TEST(Coalition, ComputesEachRoundOnceForAllMembers) {
  auto setup = setup_for(options_with("alie", 2));
  ASSERT_TRUE(setup.ok());
  auto a = Replica::create(*setup), b = Replica::create(*setup);
  ASSERT_TRUE(a.ok() && b.ok());
  Coalition coalition(*setup);
  std::shared_ptr<const RoundView> first, second;
  std::thread other([&] { second = coalition.view(*b, 0); });
  first = coalition.view(*a, 0);
  other.join();
  EXPECT_EQ(first.get(), second.get());
  EXPECT_NE(coalition.view(*a, 1).get(), first.get());
}

TEST(Adversary, NeedsTheViewOnlyForOmniscientAttacks) {
  for (const auto& [attack, needs] : std::vector<std::pair<const char*, bool>>{{"reverse", false},
                                                                               {"random", false},
                                                                               {"label_flip", false},
                                                                               {"crash", false},
                                                                               {"omniscient", true},
                                                                               {"alie", true},
                                                                               {"ipm", true},
                                                                               {"mimic", true},
                                                                               {"sign_flip", true}}) {
    auto setup = setup_for(options_with(attack, 1));
    ASSERT_TRUE(setup.ok()) << attack << ": " << setup.error().to_string();
    EXPECT_EQ(needs_honest_view(*setup), needs) << attack;
  }
  auto nobody = setup_for(options_with("alie", 0));
  ASSERT_TRUE(nobody.ok());
  EXPECT_FALSE(needs_honest_view(*nobody));
}

TEST(Adversary, VoteFollowsTheActiveBehaviourAndItsSchedule) {
  auto setup = setup_for(options_with("reverse:from=2,until=3", 1));
  ASSERT_TRUE(setup.ok());
  const std::size_t attacker = setup->byzantine.at(0);
  BitVector honest(100);
  for (std::size_t k = 0; k < 100; k += 3) honest.set(k, true);
  for (std::uint64_t round = 0; round < 5; ++round) {
    BitVector vote = honest;
    byzantine_vote(*setup, nullptr, attacker, round, vote);
    const bool active = round == 2 || round == 3;
    for (std::size_t k = 0; k < 100; ++k) ASSERT_EQ(vote.get(k), active ? !honest.get(k) : honest.get(k));
  }
}

TEST(Adversary, OmniscientVotesComeFromTheView) {
  auto setup = setup_for(options_with("omniscient", 2));
  ASSERT_TRUE(setup.ok());
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  HonestView view(*setup);
  const RoundView& seen = view.compute(*replica, 0);
  const auto expected = attacks::omniscient_votes(setup->code, seen.partition_signs, setup->byzantine);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    BitVector vote = seen.honest_votes[setup->byzantine[rank]];
    byzantine_vote(*setup, &seen, setup->byzantine[rank], 0, vote);
    EXPECT_EQ(vote, expected[rank]);
    EXPECT_EQ(coalition_rank(*setup, setup->byzantine[rank]), rank);
  }
}

// A member that lags behind (the server decided round r without it while another member already
// computed r + 1) gets round r's view as it was, not a recomputation that would advance the
// worker momentum twice and out of order.
TEST(Adversary, CoalitionKeepsRecentRoundsForLaggingMembers) {
  auto setup = setup_for(options_with("omniscient", 2));
  ASSERT_TRUE(setup.ok());
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  Coalition coalition(*setup);
  const auto first = coalition.view(*replica, 0);
  const auto second = coalition.view(*replica, 1);
  EXPECT_EQ(coalition.view(*replica, 0), first);  // the same object: not computed again
  EXPECT_EQ(coalition.view(*replica, 1), second);
  EXPECT_EQ(first->round, 0u);
  EXPECT_EQ(second->round, 1u);
  EXPECT_EQ(first->omniscient_votes.size(), 2u);  // computed once per round for the coalition

  // The same two rounds through a fresh view in order give the same messages.
  HonestView fresh(*setup);
  auto other = Replica::create(*setup);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(fresh.compute(*other, 0).honest_votes, first->honest_votes);
  EXPECT_EQ(fresh.compute(*other, 1).honest_votes, second->honest_votes);
}

TEST(Adversary, OmissionDrawsAreReproducibleAndNearTheirProbability) {
  auto setup = setup_for(options_with("omission:p=0.3", 2));
  ASSERT_TRUE(setup.ok());
  const std::size_t attacker = setup->byzantine.at(0);
  std::size_t omitted = 0;
  for (std::uint64_t round = 0; round < 2000; ++round) {
    const bool drop = omits_vote(*setup, attacker, round);
    EXPECT_EQ(drop, omits_vote(*setup, attacker, round));
    omitted += drop;
  }
  EXPECT_NEAR(static_cast<double>(omitted), 600.0, 80.0);  // 2000 · 0.3, > 3.9 sd
  std::size_t honest = 0;
  while (setup->is_byzantine(honest)) ++honest;
  for (std::uint64_t round = 0; round < 100; ++round) EXPECT_FALSE(omits_vote(*setup, honest, round));
}

TEST(Adversary, GradientPathCraftsFromTheHonestGradients) {
  auto options = options_with("ipm:eps=2", 2);
  options.code = "identity";
  options.rule = "mean";
  auto setup = setup_for(options);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto replica = Replica::create(*setup);
  ASSERT_TRUE(replica.ok());
  HonestView view(*setup);
  const RoundView& seen = view.compute(*replica, 0);
  const std::size_t d = replica->dimension();
  std::vector<double> mean(d, 0.0);
  std::size_t honest = 0;
  for (std::size_t i = 0; i < 7; ++i) {
    if (setup->is_byzantine(i)) continue;
    ++honest;
    for (std::size_t k = 0; k < d; ++k) mean[k] += seen.gradients[i][k];
  }
  std::vector<float> gradient = seen.gradients[setup->byzantine[0]];
  byzantine_gradient(*setup, &seen, setup->byzantine[0], 0, gradient);
  for (std::size_t k = 0; k < d; ++k) EXPECT_NEAR(gradient[k], -2.0 * mean[k] / honest, 1e-5);
}

TEST(Adversary, SignDomainAttacksAreRefusedOnTheGradientPath) {
  auto options = options_with("reverse", 1);
  options.code = "identity";
  options.rule = "median";
  const auto status = options.validate();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("sign-domain"), std::string::npos);
}

}  // namespace
}  // namespace ballot::runtime
