// Integration tests of the process cluster: real `ballot server` / `ballot node` processes over
// mutual TLS on loopback, with crashes injected by SIGKILL.
#include "runtime/cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/experiment.h"
#include "runtime/simulator.h"
#include "runtime_test_util.h"
#include "transport/crypto.h"

namespace ballot::runtime {
namespace {

ClusterConfig small_cluster(std::uint64_t rounds) {
  ClusterConfig config;
  config.training = testing::small_synthetic_run(5, "paper5", rounds, 0);
  config.checkpoint_every = 10;
  config.round_deadline_ms = 400;
  return config;
}

class ProcessCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ballot_cluster_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  Result<LocalCluster> prepare(ClusterConfig config) {
    config.checkpoint = dir_ / "server.ckpt";
    config.metrics = dir_ / "metrics.jsonl";
    return LocalCluster::prepare(std::move(config), BALLOT_PROGRAM, dir_);
  }

  // The model digest and round of the server's last checkpoint.
  std::pair<transport::Digest, std::uint64_t> final_state() {
    auto checkpoint = load_checkpoint(dir_ / "server.ckpt");
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.error().to_string();
    if (!checkpoint.ok()) return {};
    return {transport::sha256(checkpoint->sections.at("model")), checkpoint->round};
  }

  // Starts the server and every node and waits for the run to end successfully.
  void run_to_the_end(LocalCluster& cluster) {
    ASSERT_TRUE(cluster.start_server(false).ok());
    ASSERT_TRUE(cluster.start_all_nodes().ok());
    auto status = cluster.wait();
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    ASSERT_EQ(*status, 0) << "see " << dir_;
  }

  // The same training in one process (simulator, lockstep engine), on freshly loaded data.
  static Result<TrainingSetup> setup_for(const TrainingOptions& options) { return testing::setup_for(options); }

  std::size_t metric_lines() {
    std::ifstream in(dir_ / "metrics.jsonl");
    std::size_t lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  std::filesystem::path dir_;
};

// The acceptance criterion: the simulator and the process cluster give bit-identical models for
// a fixed seed and no faults.
TEST_F(ProcessCluster, MatchesTheSimulatorBitForBit) {
  auto cluster = prepare(small_cluster(30));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(*cluster));
  const auto [digest, round] = final_state();
  EXPECT_EQ(round, 30u);
  EXPECT_EQ(metric_lines(), 30u);

  auto setup = setup_for(cluster->config().training);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto simulated = simulate(*setup);
  ASSERT_TRUE(simulated.ok()) << simulated.error().to_string();
  EXPECT_EQ(simulated->server.model_digest, digest);
}

// Issue 8: the same attacks run in the process cluster and in the simulators. The attackers
// recompute the honest messages they need from the shared deterministic state, so the cluster,
// the message simulator and the lockstep engine end with the same model.
TEST_F(ProcessCluster, AttacksGiveTheSameModelAsTheSimulators) {
  auto config = small_cluster(20);
  config.training.attack = "alie + label_flip";
  config.training.attackers = 1;
  auto cluster = prepare(config);
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(*cluster));
  const auto [digest, round] = final_state();
  EXPECT_EQ(round, 20u);

  auto setup = setup_for(cluster->config().training);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  ASSERT_EQ(setup->byzantine.size(), 1u);
  auto simulated = simulate(*setup);
  ASSERT_TRUE(simulated.ok()) << simulated.error().to_string();
  EXPECT_EQ(simulated->server.model_digest, digest);
  auto lockstep = run_experiment(*setup);
  ASSERT_TRUE(lockstep.ok()) << lockstep.error().to_string();
  EXPECT_EQ(lockstep->model_digest, digest);
}

// Issue 7: the exchange placement over real processes — nodes listen, dial each other and relay
// their signed partition signs — trains the replicated placement's model bit for bit.
TEST_F(ProcessCluster, ExchangePlacementMatchesTheReplicatedModelBitForBit) {
  auto config = small_cluster(20);
  config.training.placement = Placement::kExchange;
  // Without faults no round waits for a deadline; a long one keeps the first round (while the
  // node-to-node sessions come up) from voting without an input on a busy machine.
  config.round_deadline_ms = 4000;
  auto cluster = prepare(config);
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_EQ(cluster->config().nodes.size(), 5u);
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(*cluster));
  const auto [digest, round] = final_state();
  EXPECT_EQ(round, 20u);

  auto replicated = cluster->config().training;
  replicated.placement = Placement::kReplicated;
  auto setup = setup_for(replicated);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto simulated = simulate(*setup);
  ASSERT_TRUE(simulated.ok()) << simulated.error().to_string();
  EXPECT_EQ(simulated->server.model_digest, digest);
}

// The same placement's equivocation over TLS: node 0 sends different signed signs to different
// nodes of its column; the server proves it from two votes and quarantines node 0.
TEST_F(ProcessCluster, ExchangeEquivocatorIsProvenAndQuarantined) {
  auto config = small_cluster(8);
  config.training.placement = Placement::kExchange;
  config.training.attack = "equivocation";
  config.training.attacker_choice = "0";
  config.round_deadline_ms = 4000;
  auto cluster = prepare(config);
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(*cluster));
  EXPECT_EQ(final_state().second, 8u);
  std::ifstream log(dir_ / "server.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("quarantined {0}, 1 equivocation proofs"), std::string::npos) << text;
}

// b node processes crash mid-run: the run completes with the quorum n - b.
TEST_F(ProcessCluster, SurvivesTheCrashOfBNodes) {
  auto cluster = prepare(small_cluster(40));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  // Wait until training is under way, then kill node 2.
  for (int i = 0; i < 400 && metric_lines() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cluster->kill_node(2);
  auto status = cluster->wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 0) << "see " << dir_;
  EXPECT_EQ(final_state().second, 40u);
  std::ifstream in(dir_ / "metrics.jsonl");
  bool saw_missing = false;
  for (std::string line; std::getline(in, line);) saw_missing |= line.find("\"missing\":[2]") != std::string::npos;
  EXPECT_TRUE(saw_missing);
}

// A restarted node fetches the state from the server and votes again.
TEST_F(ProcessCluster, RestartedNodeRejoins) {
  auto cluster = prepare(small_cluster(60));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  for (int i = 0; i < 400 && metric_lines() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cluster->kill_node(1);
  for (int i = 0; i < 400 && metric_lines() < 15; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(cluster->start_node(1).ok());
  auto status = cluster->wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 0) << "see " << dir_;
  // After it rejoined, rounds have all five votes again.
  std::ifstream in(dir_ / "metrics.jsonl");
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  EXPECT_NE(last.find("\"votes\":5"), std::string::npos) << last;
}

// The server is killed and started again with the same command: it resumes from its checkpoint
// and the run ends at the same place as an undisturbed one.
TEST_F(ProcessCluster, ServerRestartResumesFromTheCheckpoint) {
  auto cluster = prepare(small_cluster(200));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  for (int i = 0; i < 800 && metric_lines() < 25; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cluster->kill_server();
  ASSERT_TRUE(cluster->start_server(false).ok());
  auto status = cluster->wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 0) << "see " << dir_;
  EXPECT_EQ(final_state().second, 200u);
  // The restarted server resumed from one of its checkpoints (every 10 rounds), not from scratch.
  std::ifstream log(dir_ / "server.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  const auto at = text.find("(from round ");
  ASSERT_NE(at, std::string::npos) << text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
  const int resumed_from = std::stoi(text.substr(at + 12));
  EXPECT_GT(resumed_from, 0);
  EXPECT_LT(resumed_from, 200);
  EXPECT_EQ(resumed_from % 10, 0);

  // Final accuracy within 1 point of an undisturbed run of the same configuration.
  auto setup = setup_for(cluster->config().training);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto undisturbed = simulate(*setup);
  ASSERT_TRUE(undisturbed.ok());
  auto resumed = Replica::create(*setup);
  ASSERT_TRUE(resumed.ok());
  auto checkpoint = load_checkpoint(dir_ / "server.ckpt");
  ASSERT_TRUE(checkpoint.ok());
  ASSERT_TRUE(resumed->restore_from(*checkpoint).ok());
  const double accuracy = resumed->evaluate(setup->data->test, setup->data->test.size()).accuracy;
  EXPECT_NEAR(accuracy, undisturbed->server.test.accuracy, 0.01);
}

}  // namespace
}  // namespace ballot::runtime
