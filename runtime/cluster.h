// Running the round protocol as real processes over mutual TLS.
//
//   run_server / run_node   one role of a cluster described by a ClusterConfig: load this
//                           process's credentials and the pinned registry from config.keys, open
//                           the TLS transport (the server listens, nodes dial it) and run the role.
//   open_cluster_node       run_node's first half: a node's setup and open transport, for a caller
//                           that drives the node's NodeSession itself (ballot.session in Python).
//   LocalCluster            `ballot train`'s default: a throw-away PKI in a temporary directory, a
//                           cluster file, and one server plus n node processes on loopback, started
//                           from the `ballot` program itself. Nodes can be killed and restarted
//                           (tests of fault tolerance do exactly that).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/cluster_config.h"
#include "runtime/roles.h"
#include "transport/tls_transport.h"

namespace ballot::runtime {

Result<TrainingSummary> run_server(const ClusterConfig& config, ServerOptions options);
Result<NodeSummary> run_node(const ClusterConfig& config, std::size_t node_index, NodeOptions options = {});

// Node `node_index` of the cluster, ready to run: its training setup (data loaded as `ballot
// node` does), its mutual-TLS transport open (its credentials and the pinned registry from
// config.keys; dialling the server, and listening/dialling its peers in the exchange placement)
// and `options` completed from the config — state_dir and state_every (config.node_state,
// checkpoint_every) unless set, the registry, and the evidence observer, which the transport
// reports to. The setup lives on the heap: sessions and roles keep references to it.
struct ClusterNode {
  std::size_t index = 0;
  std::unique_ptr<TrainingSetup> setup;
  std::unique_ptr<transport::TlsTransport> transport;
  NodeOptions options;
};
Result<ClusterNode> open_cluster_node(const ClusterConfig& config, std::size_t node_index, NodeOptions options = {});

// One JSON object per line for the metrics file (round, votes, missing, loss, accuracy, bytes).
std::string metrics_json_line(const RoundReport& report);

// The environment of a node started with a node command: its cluster file and its index.
inline constexpr const char* kClusterFileVariable = "BALLOT_CLUSTER";
inline constexpr const char* kNodeIndexVariable = "BALLOT_NODE_INDEX";

// glibc malloc settings under which a round's buffers of megabytes (votes, decisions, frames) stay
// in the heap from one round to the next, instead of being mapped, faulted in and zeroed again
// every round. The `ballot` program sets them for itself (mallopt); a node command that
// LocalCluster starts gets them as glibc's variables (MALLOC_MMAP_THRESHOLD_, ...) unless its
// environment already names them. The library never changes them in a caller's process.
inline constexpr int kRoundBufferMmapThreshold = 64 << 20;
inline constexpr int kRoundBufferTrimThreshold = 256 << 20;
inline constexpr int kRoundBufferTopPad = 64 << 20;

class LocalCluster {
 public:
  // Makes `work_dir` (created if missing) hold ca/ (the CA, which no process reads), keys/,
  // cluster.json and logs; picks a free
  // loopback port. `program` is the `ballot` executable that provides `server` and `node`.
  // `node_command`, when not empty, is the program and arguments each node runs instead of
  // `ballot node` (e.g. a PyTorch script using ballot.torch), with kClusterFileVariable and
  // kNodeIndexVariable in its environment.
  static Result<LocalCluster> prepare(ClusterConfig config, std::filesystem::path program,
                                      std::filesystem::path work_dir, std::vector<std::string> node_command = {});

  const ClusterConfig& config() const noexcept { return config_; }
  const std::filesystem::path& cluster_file() const noexcept { return cluster_file_; }
  const std::filesystem::path& work_dir() const noexcept { return work_dir_; }

  // Starts the server process; its standard output is inherited when `show_output`, else logged.
  Status start_server(bool show_output);
  // Starts (or restarts) node `index`; its output goes to work_dir/node-<index>.log.
  Status start_node(std::size_t index);
  Status start_all_nodes();
  // SIGKILL, as a crash would.
  void kill_node(std::size_t index);
  // The process id of node `index` (-1 when not running), e.g. to pause it with SIGSTOP.
  pid_t node_pid(std::size_t index) const { return index < nodes_.size() ? nodes_[index] : -1; }
  void kill_server();
  // Waits for the server to exit and returns its exit status (0 = the run completed); then
  // waits for the nodes, killing any still running after `grace` (at once when stopped).
  // `stop`: set (from a signal handler) to end the run early: the server is sent SIGTERM when a
  // signal interrupts the wait and it is set.
  Result<int> wait(std::chrono::milliseconds grace = std::chrono::milliseconds(10000),
                   const std::atomic<bool>* stop = nullptr);
  ~LocalCluster();
  LocalCluster(LocalCluster&&) noexcept;
  LocalCluster& operator=(LocalCluster&&) = delete;

 private:
  LocalCluster() = default;
  // Starts `args` (args[0] is the program, looked up on PATH when it has no '/') with `environment`
  // added to this process's.
  Result<pid_t> spawn(const std::vector<std::string>& args, const std::filesystem::path& log,
                      const std::vector<std::string>& environment = {});
  ClusterConfig config_;
  std::filesystem::path program_;
  std::vector<std::string> node_command_;
  std::filesystem::path work_dir_;
  std::filesystem::path cluster_file_;
  pid_t server_ = -1;
  std::vector<pid_t> nodes_;
};

}  // namespace ballot::runtime
