// Integration tests of the process cluster: real `ballot server` / `ballot node` processes over
// mutual TLS on loopback, with crashes injected by SIGKILL.
#include "runtime/cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "runtime/experiment.h"
#include "runtime/replica.h"
#include "runtime/simulator.h"
#include "runtime_test_util.h"
#include "transport/crypto.h"

extern char** environ;

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
    dir_ = std::filesystem::temp_directory_path() / ("ballot_cluster_test_" + std::to_string(::getpid()) + "_" +
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
  // The metrics rows so far, parsed.
  std::vector<nlohmann::json> metric_rows() {
    std::ifstream in(dir_ / "metrics.jsonl");
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(in, line);) {
      auto row = nlohmann::json::parse(line, nullptr, false);
      if (row.is_object()) rows.push_back(std::move(row));
    }
    return rows;
  }
  void wait_for_rows(std::size_t rows, int max_ms = 60000) {
    for (int waited = 0; waited < max_ms && metric_lines() < rows; waited += 25) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  std::string server_log() {
    std::ifstream log(dir_ / "server.log");
    return std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  }
  static bool missing_node(const nlohmann::json& row, std::size_t node) {
    for (const auto& missing : row["missing"]) {
      if (missing.get<std::size_t>() == node) return true;
    }
    return false;
  }
  // A second `ballot node --index i` of this cluster (same key), outside the LocalCluster.
  pid_t spawn_node(const LocalCluster& cluster, std::size_t index, const std::filesystem::path& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<std::string> args{BALLOT_PROGRAM,       "node", "--cluster", cluster.cluster_file().string(), "--index",
                                  std::to_string(index)};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, BALLOT_PROGRAM, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    return pid;
  }

  std::filesystem::path dir_;
};

// The acceptance criterion: the simulator and the process cluster give bit-identical models for
// a fixed seed and no faults.
// A node command runs with its cluster file and index, and with glibc's malloc settings that keep a
// round's buffers in the heap (as `ballot` sets for itself), unless its environment names them.
TEST_F(ProcessCluster, ANodeCommandGetsItsClusterAndTheRoundBufferSettings) {
  const auto file = dir_ / "environment";
  auto config = small_cluster(1);
  config.checkpoint = dir_ / "server.ckpt";
  ASSERT_EQ(::setenv("MALLOC_TOP_PAD_", "4096", 1), 0);
  auto cluster = LocalCluster::prepare(std::move(config), BALLOT_PROGRAM, dir_,
                                       {"/bin/sh", "-c", "env > \"$0.part\" && mv \"$0.part\" \"$0\"", file.string()});
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_node(1).ok());
  for (int waited = 0; waited < 20000 && !std::filesystem::exists(file); waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::unsetenv("MALLOC_TOP_PAD_");
  std::ifstream in(file);
  std::multiset<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.insert(line);
  EXPECT_EQ(lines.count("BALLOT_NODE_INDEX=1"), 1u);
  EXPECT_EQ(lines.count("BALLOT_CLUSTER=" + cluster->cluster_file().string()), 1u);
  EXPECT_EQ(lines.count("MALLOC_MMAP_THRESHOLD_=" + std::to_string(kRoundBufferMmapThreshold)), 1u);
  EXPECT_EQ(lines.count("MALLOC_TRIM_THRESHOLD_=" + std::to_string(kRoundBufferTrimThreshold)), 1u);
  EXPECT_EQ(lines.count("MALLOC_TOP_PAD_=4096"), 1u);  // the caller's, alone
  for (const auto& line : lines) EXPECT_NE(line, "MALLOC_TOP_PAD_=" + std::to_string(kRoundBufferTopPad));
}

// A work directory kept from a smaller cluster gets the certificates it lacks (same CA); without
// the CA key they cannot be issued, and that is said before any process starts.
TEST_F(ProcessCluster, AKeptWorkDirectoryGetsTheMissingCertificates) {
  auto config = small_cluster(1);
  config.training.nodes = 3;
  ASSERT_TRUE(prepare(config).ok());
  const auto keys = dir_ / "keys";
  const auto text = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string ca_before = text(transport::ca_cert_path(keys));
  ASSERT_FALSE(ca_before.empty());
  EXPECT_FALSE(std::filesystem::exists(transport::node_cert_path(keys, node_id(3))));
  config.training.nodes = 5;
  ASSERT_TRUE(prepare(config).ok());
  EXPECT_EQ(text(transport::ca_cert_path(keys)), ca_before);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_TRUE(std::filesystem::exists(transport::node_cert_path(keys, node_id(i))));
  // A node key without its certificate (an issue cut short) is made anew, not refused.
  std::filesystem::remove(transport::node_cert_path(keys, node_id(2)));
  const auto prepared = prepare(config);
  ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
  EXPECT_TRUE(std::filesystem::exists(transport::node_cert_path(keys, node_id(2))));
  std::filesystem::remove_all(dir_ / "ca");
  config.training.nodes = 7;
  auto refused = prepare(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("node-6.crt"), std::string::npos) << refused.error().message;
}

// A CA key an earlier try left without its certificate (killed between the two) is made anew; a
// whole CA whose copy never reached keys/ is never removed: refused, as before.
TEST_F(ProcessCluster, ATornCaIsMadeAnewAndAWholeOneIsKept) {
  auto config = small_cluster(1);
  std::filesystem::create_directories(dir_ / "ca");
  std::ofstream(dir_ / "ca" / "ca.key") << "torn";
  const auto prepared = prepare(config);
  ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
  EXPECT_TRUE(std::filesystem::exists(transport::ca_cert_path(dir_ / "keys")));
  std::filesystem::remove_all(dir_ / "keys");
  const auto refused = prepare(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("ca.key"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(std::filesystem::exists(transport::ca_key_path(dir_ / "ca")));
}

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

// Relayed decisions over real processes and mutual TLS between the nodes: the voters hand the
// server's pieces on, and the run ends with the simulator's model (without relays), bit for bit.
TEST_F(ProcessCluster, RelayedDecisionsMatchTheSimulatorBitForBit) {
  auto config = small_cluster(30);
  config.relay_decisions = true;
  auto cluster = prepare(config);
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_EQ(cluster->config().nodes.size(), 5u);  // every node listens: they connect to each other
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(*cluster));
  const auto [digest, round] = final_state();
  EXPECT_EQ(round, 30u);
  auto setup = setup_for(cluster->config().training);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto simulated = simulate(*setup);
  ASSERT_TRUE(simulated.ok()) << simulated.error().to_string();
  EXPECT_EQ(simulated->server.model_digest, digest);
  // Each node reports the pieces it handed on; none needed the whole decision.
  std::uint64_t relayed = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    std::ifstream log(dir_ / ("node-" + std::to_string(i) + ".log"));
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    const auto at = text.find("decision pieces relayed ");
    ASSERT_NE(at, std::string::npos) << text;
    relayed += std::stoull(text.substr(at + 24));
  }
  EXPECT_GE(relayed, 29u * 4);  // the last decision goes whole; at least n − b voters relay
}

// the same attacks run in the process cluster and in the simulators. The attackers
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

// the exchange placement over real processes — nodes listen, dial each other and relay
// their signed partition signs — trains the replicated placement's model bit for bit.
TEST_F(ProcessCluster, ExchangePlacementMatchesTheReplicatedModelBitForBit) {
  auto config = small_cluster(20);
  config.training.placement = Placement::kExchange;
  // Without faults no round waits for a deadline; a long one keeps the first round (while the
  // node-to-node sessions come up) from voting without an input on a busy machine, under the
  // sanitizers too (a node waits half the deadline for its inputs).
  config.round_deadline_ms = 60000;
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
// and its decision log, at the round the nodes reached, and the run ends at the same place as an
// undisturbed one.
//
// It failed now and then under load, for causes since fixed: rewound nodes kept the worker
// momentum of a later round; their queued votes for rounds the restarted server had not reached
// counted as misbehaviour; and, the last one, the restarted server redid the rounds after its
// checkpoint with whichever votes arrived first, so its decision could differ from the one the
// nodes had applied, and the nodes that had signed votes for the next round on the old model
// abstained (as their signed record must): the round missed its quorum. Now every decision is in
// the server's decision log before it is sent, and the restarted server replays the log.
TEST_F(ProcessCluster, ServerRestartResumesFromTheCheckpoint) {
  auto config = small_cluster(200);
  config.node_state = dir_;
  auto cluster = prepare(config);
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  for (int i = 0; i < 800 && metric_lines() < 25; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  cluster->kill_server();
  const std::size_t reported = metric_lines();  // rounds 0 .. reported − 1 have their rows
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
  std::printf("killed with %zu rows reported; resumed at round %d\n", reported, resumed_from);
  // At the round the old server was in, or (killed between a round's row and its log record)
  // the one before: the rounds before it were replayed, not redone.
  EXPECT_GE(resumed_from + 1, static_cast<int>(reported)) << text;
  EXPECT_LT(resumed_from, 200);
  if (resumed_from % 10 != 0) {
    EXPECT_NE(text.find("decisions replayed from its decision log"), std::string::npos);
  }
  EXPECT_NE(text.find("quarantined {}, 0 equivocation proofs"), std::string::npos) << text;
  // Metrics: one row per round, the redone rounds included once.
  std::set<std::uint64_t> rounds;
  for (const auto& row : metric_rows()) EXPECT_TRUE(rounds.insert(row["round"].get<std::uint64_t>()).second) << row;
  EXPECT_EQ(rounds.size(), 200u);

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

// A second process with node 2's key connects while node 2 runs: it is refused (reported as a
// duplicate session, no blame), node 2 keeps voting through the clash and after it, and nobody is
// quarantined.
TEST_F(ProcessCluster, DuplicateIdentityIsRefusedAndTheHonestNodeKeepsVoting) {
  auto cluster = prepare(small_cluster(300));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  wait_for_rows(10);
  const std::size_t clash_from = metric_lines();
  const pid_t duplicate = spawn_node(*cluster, 2, dir_ / "duplicate.log");
  ASSERT_GT(duplicate, 0);
  // Long enough for the duplicate to load its data, connect and be refused a few times.
  const auto clash_until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < clash_until && metric_lines() < 260) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const std::size_t clash_to = metric_lines();
  ::kill(duplicate, SIGKILL);
  ::waitpid(duplicate, nullptr, 0);
  auto status = cluster->wait();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(*status, 0) << "see " << dir_;
  const auto rows = metric_rows();
  ASSERT_EQ(rows.size(), 300u);
  std::size_t missed = 0;
  for (std::size_t i = clash_from; i < rows.size(); ++i) missed += missing_node(rows[i], 2) ? 1 : 0;
  EXPECT_LE(missed, 2u) << "node 2 missed rounds during or after the clash (" << clash_from << ".." << clash_to << ")";
  EXPECT_EQ(rows.back()["votes"].get<std::size_t>(), 5u);
  const std::string log = server_log();
  EXPECT_NE(log.find("quarantined {}, 0 equivocation proofs"), std::string::npos) << log;
  const auto refused = log.find("second sessions refused for a live node id: {node 2: ");
  EXPECT_NE(refused, std::string::npos) << log;
}

// An attacker with no key keeps 200 sockets open to the server, idle, re-opening each one the
// server closes. A killed node restarted during the flood rejoins within a bounded number of
// rounds; the time is measured with and without the flood.
TEST_F(ProcessCluster, RejoinsThroughAFloodOfIdleSockets) {
  auto cluster = prepare(small_cluster(100000));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  wait_for_rows(10);
  // Kills node 1, lets 5 rounds pass, restarts it; returns seconds and rounds until a round
  // counted its vote again.
  const auto rejoin = [&]() -> std::pair<double, std::size_t> {
    cluster->kill_node(1);
    wait_for_rows(metric_lines() + 5);
    const std::size_t from = metric_lines();
    const auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE(cluster->start_node(1).ok());
    for (int waited = 0; waited < 120000; waited += 20) {
      const auto rows = metric_rows();
      for (std::size_t i = from; i < rows.size(); ++i) {
        if (!missing_node(rows[i], 1)) {
          return {std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), i - from + 1};
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {1e9, 1000000};
  };
  const auto quiet = rejoin();

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> opened{0};
  const std::uint16_t port = cluster->config().server_port;
  std::thread flood([&] {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::vector<pollfd> sockets(200, pollfd{-1, POLLIN, 0});
    while (!stop) {
      for (auto& socket : sockets) {
        if (socket.fd >= 0) continue;
        socket.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (socket.fd < 0) continue;
        (void)::connect(socket.fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
        ++opened;
      }
      ::poll(sockets.data(), sockets.size(), 5);
      for (auto& socket : sockets) {
        if (socket.fd >= 0 && (socket.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          // The server closed it (a readable socket here is EOF): re-open. An abortive close
          // (RST) leaves no TIME_WAIT behind: tens of thousands of them on loopback would exhaust
          // the ephemeral ports, and then no process on the machine (a node that redials, the
          // next test) could connect at all, which is not what this test measures.
          const linger abort{1, 0};
          (void)::setsockopt(socket.fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
          ::close(socket.fd);
          socket.fd = -1;
        }
        socket.revents = 0;
      }
    }
    for (auto& socket : sockets) {
      if (socket.fd >= 0) ::close(socket.fd);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the flood is in full swing
  const auto flooded = rejoin();
  stop = true;
  flood.join();
  cluster->kill_server();
  std::printf(
      "rejoin of a killed node: %.2f s (%zu rounds) without the flood, %.2f s (%zu rounds) under a flood of 200 "
      "idle re-opening sockets (%llu connections opened)\n",
      quiet.first, quiet.second, flooded.first, flooded.second, static_cast<unsigned long long>(opened.load()));
  RecordProperty("rejoin_seconds_quiet", std::to_string(quiet.first));
  RecordProperty("rejoin_seconds_flood", std::to_string(flooded.first));
  EXPECT_GT(opened.load(), 200u);
  EXPECT_LE(quiet.second, 20u);
  EXPECT_LE(flooded.second, 20u);  // bounded: a node with a valid certificate always gets in
  EXPECT_LT(flooded.first, quiet.first + 10.0);
}

// A node paused with SIGSTOP (its votes, when it wakes up, are late and on an old model) is never
// quarantined: it catches up through the state transfer and votes again. While it sleeps the
// rounds go on without waiting for it (it is absent: one deadline in kAbsentProbeEvery rounds),
// so it wakes up behind and rejoins through the state transfer.
TEST_F(ProcessCluster, PausedNodeIsNotQuarantinedAndVotesAgain) {
  constexpr std::size_t kRounds = 1000;  // of a few ms each: the run outlasts the node's return
  auto cluster = prepare(small_cluster(kRounds));
  ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
  ASSERT_TRUE(cluster->start_server(false).ok());
  ASSERT_TRUE(cluster->start_all_nodes().ok());
  wait_for_rows(10);
  const pid_t paused = cluster->node_pid(3);
  ASSERT_GT(paused, 0);
  ASSERT_EQ(::kill(paused, SIGSTOP), 0);
  const auto paused_at = std::chrono::steady_clock::now();
  const std::size_t rows_at_pause = metric_lines();
  wait_for_rows(rows_at_pause + 20);  // the first waited the deadline: its votes are late
  const auto twenty_rounds = std::chrono::steady_clock::now() - paused_at;
  const std::size_t resumed_at = metric_lines();
  ASSERT_EQ(::kill(paused, SIGCONT), 0);
  auto status = cluster->wait();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(*status, 0) << "see " << dir_;
  const auto rows = metric_rows();
  ASSERT_EQ(rows.size(), kRounds);
  // Twenty rounds without it took three deadlines (400 ms: the miss and two probes) and little
  // more, not twenty.
  EXPECT_LT(twenty_rounds, std::chrono::milliseconds(5000));
  bool missed_while_paused = false;
  for (std::size_t i = rows_at_pause; i < resumed_at; ++i) missed_while_paused |= missing_node(rows[i], 3);
  EXPECT_TRUE(missed_while_paused);
  std::size_t back = resumed_at;
  while (back < rows.size() && missing_node(rows[back], 3)) ++back;
  ASSERT_LT(back + 100, rows.size()) << "node 3 did not vote again before the last 100 rounds";
  std::size_t missed_after = 0;  // a round its vote missed on a loaded machine: rare, not a rule
  for (std::size_t i = back; i < rows.size(); ++i) {
    missed_after += missing_node(rows[i], 3) ? 1 : 0;
    EXPECT_TRUE(rows[i]["quarantined"].empty()) << "round " << i;
  }
  EXPECT_LE(missed_after, (rows.size() - back) / 50)
      << "node 3 missed " << missed_after << " rounds after it came back";
  const std::string log = server_log();
  EXPECT_NE(log.find("quarantined {}, 0 equivocation proofs"), std::string::npos) << log;
}

// Never sign twice: a node killed in the middle of a round and restarted at once rejoins that
// round (the long deadline keeps it open) with reset momentum. In the exchange placement its
// column already holds its signed partition signs of the round, in the replicated one the server
// may hold its vote: the new process re-sends the same signed bytes or abstains, so no receiver
// ever holds two different messages of the node for one round — no equivocation proof.
TEST_F(ProcessCluster, RestartedNodesNeverSignTwiceInEitherPlacement) {
  for (const auto placement : {Placement::kExchange, Placement::kReplicated}) {
    SCOPED_TRACE(placement == Placement::kExchange ? "exchange" : "replicated");
    std::filesystem::remove_all(dir_);
    auto config = small_cluster(60);
    config.training.placement = placement;
    config.round_deadline_ms = 3000;
    config.node_state = dir_;
    auto cluster = prepare(config);
    ASSERT_TRUE(cluster.ok()) << cluster.error().to_string();
    ASSERT_TRUE(cluster->start_server(false).ok());
    ASSERT_TRUE(cluster->start_all_nodes().ok());
    for (std::size_t at : {8u, 20u, 32u}) {
      wait_for_rows(at);
      cluster->kill_node(2);
      ASSERT_TRUE(cluster->start_node(2).ok());  // at once: it rejoins the round it died in
    }
    auto status = cluster->wait();
    ASSERT_TRUE(status.ok());
    ASSERT_EQ(*status, 0) << "see " << dir_;
    const std::string log = server_log();
    EXPECT_NE(log.find("quarantined {}, 0 equivocation proofs"), std::string::npos) << log;
    EXPECT_TRUE(std::filesystem::exists(signed_record_path(dir_, 2)));
    EXPECT_EQ(metric_rows().back()["votes"].get<std::size_t>(), 5u);
  }
}

}  // namespace
}  // namespace ballot::runtime
