// ClusterConfig: everything the processes of one cluster must agree on, in one JSON file that
// every process reads (`ballot server|node --cluster FILE`). `ballot train` writes one for its
// local cluster; for many machines, write it by hand (docs/multi_machine.md).
//
// {
//   "server": {"host": "10.0.0.1", "port": 29500, "io_threads": 1},
//   "nodes": [{"host": "10.0.0.2", "port": 29501}, …],  // exchange placement or relayed decisions
//                                                  // only: where node i listens (nodes send each
//                                                  // other their signs or decision pieces)
//   "keys": "/etc/ballot/keys",                 // ca.crt, node-<id>.crt/.key (transport/pki.h)
//   "checkpoint": "/var/lib/ballot/run.ckpt",    // server only; "" = none
//   "checkpoint_every": 50,
//   "round_deadline_ms": 3000,
//   "relay_decisions": false,                    // nodes relay the decision (needs "nodes")
//   "skip_absent": true,                         // server: wait for an absent node 1 round in 8
//   "metrics": "metrics.jsonl",                  // server only; "" = none
//   "training": {"nodes": 7, "byzantine": 1, "code": "deterministic", "model": "mlp:hidden=128",
//                "update": "...", "worker_momentum": 0, "lr": "constant:lr=0.002",
//                "partition_size": 32, "rounds": 600, "seed": 1, "job": 1,
//                "data": "fashion-mnist", "eval_every": 100, "eval_examples": 10000}
// }
// Missing keys take the defaults of TrainingOptions / this struct; unknown keys are errors, so
// a typo does not silently run with a default. A file for the roles (`ballot server|node|launch`)
// must name "server" (host and port), "keys" and "training": load_cluster_config lists every one
// that is missing, with the file's path. round_deadline_ms must be at least 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/training.h"

namespace ballot::runtime {

struct NodeAddress {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};

// A cluster file is a few KiB; a larger one is refused unread.
inline constexpr std::uint64_t kMaxClusterConfigBytes = std::uint64_t{1} << 24;

struct ClusterConfig {
  std::string server_host = "127.0.0.1";
  std::uint16_t server_port = 29500;
  // "server": {"io_threads": k}: threads of the server's transport. Each connection runs on one
  // of them at a time, so with k > 1 the decryption, payload hashing (done as bytes arrive) and
  // signature checks of different nodes' votes run in parallel; the vote, the update and the
  // model digest stay on the server's own thread.
  std::uint32_t server_io_threads = 1;
  // Exchange placement or relayed decisions: node i's listening address (exactly n entries,
  // ports set); otherwise empty (nodes only dial the server).
  std::vector<NodeAddress> nodes;
  std::filesystem::path keys;
  std::filesystem::path checkpoint;
  std::uint64_t checkpoint_every = 50;
  // Directory of each node's own state file (worker momentum, error-feedback memory), saved
  // every checkpoint_every rounds on the node's machine (NodeOptions::state_dir); empty: none.
  std::filesystem::path node_state;
  std::uint32_t round_deadline_ms = 3000;
  // The server sends each decision in pieces that the voters relay to every other node
  // (ServerSessionOptions::relay_decisions): nodes connect to each other, as in the exchange
  // placement.
  bool relay_decisions = false;
  // The server waits for a node that missed, and has not been heard from since, only in probe
  // rounds once n − b votes are in (ServerSessionOptions::skip_absent); false: every round.
  bool skip_absent = true;
  std::filesystem::path metrics;
  TrainingOptions training;
};

// What a file is read for: the roles need every required field; `ballot train --config` only
// takes its values as defaults (its local cluster sets the server and keys itself).
enum class ConfigUse { kRole, kTrainDefaults };

Result<ClusterConfig> parse_cluster_config(const std::string& json_text);
// The required fields of a role's file (above); ok when all are there.
Status check_required_fields(const std::string& json_text);
Result<ClusterConfig> load_cluster_config(const std::filesystem::path& file, ConfigUse use = ConfigUse::kRole);
std::string to_json(const ClusterConfig& config);
Status save_cluster_config(const std::filesystem::path& file, const ClusterConfig& config);

}  // namespace ballot::runtime
