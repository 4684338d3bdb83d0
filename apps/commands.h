// The subcommands of the `ballot` program. Each parses nothing itself: main.cc fills the option
// structs with CLI11 and calls one of these, which return the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cluster_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ballot::apps {

struct TrainCommand {
  runtime::ClusterConfig config;  // training options from flags / --config
  std::string work_dir;           // "" = a fresh temporary directory, removed at the end
  bool simulate = false;          // in-process simulator instead of processes over TLS
  bool lockstep = false;          // the lockstep experiment engine (runtime/experiment.h)
  std::string program;            // path of this executable (for spawning roles)
  // What each node runs instead of `ballot node` (program and arguments; empty: `ballot node`).
  std::vector<std::string> node_command;
};

// The model spec of a parameter file (`--init FILE`): "init:file=<absolute path>"; an error for a
// path the spec syntax cannot carry (',', '>' or surrounding spaces).
Result<std::string> init_model_spec(const std::string& init_file);

int run_info();
int run_train(TrainCommand command);
// `init_file` (may be empty) replaces the cluster file's model (init_model_spec).
int run_server_command(const std::string& cluster_file, const std::string& init_file);
int run_node_command(const std::string& cluster_file, std::optional<std::size_t> index);
// One role chosen from the launcher's environment (rank 0 = server, rank k = node k − 1).
int run_launch_command(const std::string& cluster_file, const std::string& init_file);

struct CodeCommand {
  std::string spec = "deterministic:b=1";  // coding/allocation_matrix.h spec
  std::size_t nodes = 7;
  std::vector<std::size_t> byzantine_counts;  // Monte Carlo rows; empty = 0..(n-1)/2
  double q = 0.9;                             // probability that a partition's sign is right
  std::string attack = "reverse";             // reverse | directional | random | opposite
  bool abstain_ties = false;                  // the reference script's tie arithmetic
  std::uint64_t trials = 1 << 16;
  std::uint64_t seed = 1;
  std::optional<std::size_t> search_b;  // instead: minimum-redundancy search for (n, b)
};
int run_code(const CodeCommand& command);

// `ballot evaluate` (apps/evaluate_command.cc, evaluation/): unset flags keep the preset's or the
// grid file's values.
struct EvaluateCommand {
  std::optional<std::string> preset, grid_file, attacks, defences, nodes, byzantine, seeds, attacker_choice;
  std::optional<std::uint64_t> rounds, eval_every;
  std::optional<double> target, worker_momentum;
  std::optional<std::uint32_t> protocol_deadline_ms;
  std::optional<std::string> data, model, lr, update, title;
  std::optional<std::size_t> partition_size, eval_examples;
  bool no_baseline = false;
  bool tune_lr = false;                        // sweep each defence's learning rate first
  std::optional<std::string> tune_lr_factors;  // multiples of the untuned rate, comma-separated
  std::optional<std::uint64_t> tune_lr_rounds;
  std::size_t jobs = 2;
  std::string out = "evaluation";
};
void add_evaluate_options(CLI::App& command, EvaluateCommand& evaluate);
int run_evaluate(const EvaluateCommand& command);

int run_keys_init(const std::string& dir, const std::string& ca_dir);
int run_keys_issue(const std::string& dir, const std::string& ca_dir, std::uint32_t node, const std::string& role);
int run_keys_show(const std::string& path);

}  // namespace ballot::apps
