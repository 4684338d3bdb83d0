#include "runtime/session_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/detail/lockstep_network.h"
#include "runtime/detail/memory_cluster.h"
#include "runtime/node_session.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

using std::chrono::milliseconds;
using transport::MessageType;

TEST(SessionClock, TheSteadyClockIsRealTime) {
  auto clock = steady_session_clock();
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(clock, steady_session_clock());  // one shared object
  const auto before = clock->now();
  const auto real = std::chrono::steady_clock::now();
  clock->sleep_for(milliseconds(20));
  EXPECT_GE(clock->now() - before, milliseconds(20));
  EXPECT_GE(std::chrono::steady_clock::now() - real, milliseconds(20));
}

// The lockstep engine's network: a server and two nodes of a run on the in-memory transport.
struct LockstepFixture {
  LockstepFixture() {
    auto options = testing::small_synthetic_run(2, "identity", 1, 0);
    options.byzantine = 0;
    auto made = testing::setup_for(options);
    EXPECT_TRUE(made.ok());
    setup = std::make_unique<TrainingSetup>(std::move(*made));
    auto cluster = detail::make_memory_cluster(*setup, nullptr);
    EXPECT_TRUE(cluster.ok());
    server = std::make_unique<detail::LockstepEndpoint>(time, std::move(cluster->endpoints[0]), true);
    for (std::size_t i = 1; i <= 2; ++i)
      nodes.push_back(std::make_unique<detail::LockstepEndpoint>(time, std::move(cluster->endpoints[i]), false));
  }
  std::unique_ptr<TrainingSetup> setup;
  detail::LockstepTime time;
  std::unique_ptr<detail::LockstepEndpoint> server;
  std::vector<std::unique_ptr<detail::LockstepEndpoint>> nodes;
};

TEST(LockstepNetwork, WaitingCostsNoWallTimeAndMovesTheWaitersClock) {
  LockstepFixture f;
  const auto wall = std::chrono::steady_clock::now();
  const auto start = f.time.now();
  // A node that waits moves only its own clock; the server's wait moves the run's.
  EXPECT_EQ(f.nodes[0]->receive(milliseconds(5000)).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(f.nodes[0]->now() - start, milliseconds(5000));
  EXPECT_EQ(f.time.now(), start);
  EXPECT_EQ(f.server->receive(milliseconds(3000)).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(f.time.now() - start, milliseconds(3000));
  EXPECT_EQ(f.nodes[1]->now() - start, milliseconds(3000));  // a node not ahead is at the run's time
  EXPECT_EQ(f.nodes[0]->now() - start, milliseconds(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - wall, milliseconds(1000));
}

// What a node sends while its clock is ahead (it slept: the delay attack) arrives when the run's
// time reaches it, after what others sent in between, and the server's wait stops there.
TEST(LockstepNetwork, AFrameSentAheadOfTheRunArrivesWhenItsTimeComes) {
  LockstepFixture f;
  const auto start = f.time.now();
  f.nodes[0]->sleep_for(milliseconds(6000));
  ASSERT_TRUE(f.nodes[0]->send(kServerId, MessageType::kVote, 0, {1}).ok());
  ASSERT_TRUE(f.nodes[1]->send(kServerId, MessageType::kVote, 0, {2}).ok());
  auto first = f.server->receive(milliseconds(0));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->from, node_id(1));
  EXPECT_EQ(f.server->receive(milliseconds(3000)).error().code, ErrorCode::kTimeout);  // not due yet
  EXPECT_EQ(f.time.now() - start, milliseconds(3000));
  auto late = f.server->receive(milliseconds(10000));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->from, node_id(0));
  EXPECT_EQ(f.time.now() - start, milliseconds(6000));  // the wait ended when the frame came due
}

TEST(LockstepNetwork, AnEndpointThatGoesAwayTakesItsHeldFramesWithIt) {
  LockstepFixture f;
  f.nodes[0]->sleep_for(milliseconds(100));
  ASSERT_TRUE(f.nodes[0]->send(kServerId, MessageType::kVote, 0, {1}).ok());
  ASSERT_TRUE(f.time.next_due().has_value());
  f.nodes[0].reset();
  EXPECT_FALSE(f.time.next_due().has_value());
  EXPECT_EQ(f.server->receive(milliseconds(500)).error().code, ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ballot::runtime
