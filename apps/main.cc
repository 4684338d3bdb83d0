// ballot — the command-line program. It parses options (CLI11) and calls one subcommand.
#include <CLI/CLI.hpp>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "apps/commands.h"
#include "apps/whole_number.h"
#include "attacks/attack_spec.h"
#include "coding/codec_registry.h"
#include "core/config.h"
#include "kernels/isa.h"
#include "robust/registry.h"
#include "runtime/cluster.h"

namespace ballot::apps {

int run_info() {
  std::printf("ballot %s\n", BALLOT_VERSION_STRING);
  const auto active = kernels::isa_name(kernels::active_isa());
  std::printf("cpu kernels: %.*s (supported:", static_cast<int>(active.size()), active.data());
  for (auto isa : kernels::supported_isas()) {
    const auto name = kernels::isa_name(isa);
    std::printf(" %.*s", static_cast<int>(name.size()), name.data());
  }
  std::printf(")\ncuda kernels built: %s\nnccl built: %s\n", BALLOT_HAVE_CUDA ? "yes" : "no",
              BALLOT_HAVE_NCCL ? "yes" : "no");
  return 0;
}

namespace {

// "a | b:key=v | …": a table's names (or its examples), for --help: the tables are the one list.
template <typename Table>
std::string listed(const Table& table, bool examples = true) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += " | ";
    out += examples ? entry.example : entry.name;
  }
  return out;
}

// The training flags shared by `train`; each overrides the config file's value when given.
void add_training_flags(CLI::App& command, runtime::TrainingOptions& t, runtime::ClusterConfig& config) {
  command.add_option("-n,--nodes", t.nodes, "Number of nodes n")
      ->capture_default_str()
      ->check(whole_number_for<std::size_t>());
  command.add_option("-b,--byzantine", t.byzantine, "Fault budget b (quorum n-b after the deadline)")
      ->capture_default_str()
      ->check(whole_number_for<std::size_t>());
  command
      .add_option("--code", t.code,
                  "Allocation matrix: identity | bernoulli:r=2 | deterministic[:b=B] | paper5 | file:path=P")
      ->capture_default_str();
  static const auto placements = [] {
    std::vector<std::string> out;
    for (const auto& entry : runtime::placement_table()) out.emplace_back(entry.name);
    return out;
  }();
  static const std::string placement_help = [] {
    std::string out = "Where G's inputs are computed:";
    for (const auto& entry : runtime::placement_table()) {
      out += std::string(out.back() == ':' ? " " : " | ") + std::string(entry.name) + " (" +
             std::string(entry.summary) + ")";
    }
    return out;
  }();
  // By name (an enum-valued transformer would print the enum's bytes in its help and errors).
  command
      .add_option_function<std::string>(
          "--placement", [&t](const std::string& name) { t.placement = *runtime::parse_placement(name); },
          placement_help)
      ->transform(CLI::IsMember(placements, CLI::ignore_case));
  command.add_option("--model", t.model, "Model: logreg | mlp:hidden=128 | cnn")->capture_default_str();
  command.add_option("--update", t.update, "Server update rule on the vote: heavyball:… | sign:wd=… | sgd:…")
      ->capture_default_str();
  command.add_option("--worker-momentum", t.worker_momentum, "Signum momentum at the nodes (0 = signSGD)")
      ->capture_default_str();
  command.add_option("--lr", t.lr, "Learning-rate schedule, e.g. 'constant:lr=0.002 > cosine:rounds=600'")
      ->capture_default_str();
  command.add_option("--partition-size", t.partition_size, "Examples per partition (global batch = n x this)")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.partition_size)>());
  command.add_option("--rounds", t.rounds, "Training rounds")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.rounds)>());
  command.add_option("--seed", t.seed, "Seed of everything random in the run")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.seed)>());
  command.add_option("--data", t.data, "fashion-mnist[:dir=D] | mnist:dir=D | synthetic[:…]")->capture_default_str();
  command
      .add_option("--attack", t.attack,
                  "What the Byzantine nodes do (docs/attacks.md): " + listed(attacks::attack_table()) +
                      "; join domains with '+', limit rounds with from=,until=")
      ->capture_default_str();
  command
      .add_option("--attackers", t.attackers,
                  "Number of Byzantine nodes (default with --attack: b; with --rule other than vote and no --attack, "
                  "they flip their gradients' signs)")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.attackers)>());
  command
      .add_option("--byzantine-nodes", t.attacker_choice,
                  "Which nodes attack: random (from the seed) | worst (for G) | a list 0,3,5")
      ->capture_default_str();
  command
      .add_option(
          "--rule", t.rule,
          "vote (1-bit election path) | a robust rule (docs/robust.md): " + listed(robust::rule_table(), false) +
              ", after pre-aggregators: " + listed(robust::pre_aggregator_table(), false) +
              ", e.g. 'nnm:f=1 > krum:f=1'")
      ->capture_default_str();
  command
      .add_option("--codec", t.codec,
                  "Gradient codec when --rule is not vote (docs/codecs.md; ef=1 adds error feedback): " +
                      listed(coding::codec_table()))
      ->capture_default_str();
  command.add_option("--eval-every", t.eval_every, "Rounds between test evaluations")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.eval_every)>());
  command
      .add_option("--digest-every", t.digest_every,
                  "Rounds between full parameter digests in the votes (a chain over the decisions in between)")
      ->capture_default_str()
      ->check(whole_number_for<decltype(t.digest_every)>(1));
  command.add_option("--deadline-ms", config.round_deadline_ms, "Round deadline; after it n-b votes suffice")
      ->capture_default_str()
      ->check(whole_number_for<decltype(config.round_deadline_ms)>(1));
  command.add_flag("--relay-decisions", config.relay_decisions,
                   "The server sends each decision in pieces that the voters relay to every other node (its link "
                   "carries one decision a round instead of n)");
  command.add_option("--checkpoint-every", config.checkpoint_every, "Rounds between server checkpoints")
      ->capture_default_str()
      ->check(whole_number_for<decltype(config.checkpoint_every)>());
  command.add_option("--metrics", config.metrics, "Metrics file (JSON lines); default: in the work directory");
}

}  // namespace
}  // namespace ballot::apps

namespace {

// A round frees and allocates again buffers of megabytes (votes, decisions, frames). glibc serves
// blocks that large from fresh mappings, or trims the heap under them once they are free, so every
// round paid a page fault and a zeroed page per 4 KiB of them: 18 % of the server's CPU in the
// cluster benchmark (bench/cluster, n = 8, d = 11.2 M: 0.045–0.049 → 0.037–0.039 s a round).
// Kept in the heap, the next round reuses them. Only this program sets it, never the library (its
// node commands get the same through their environment: runtime/cluster.h).
void keep_round_buffers() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, ballot::runtime::kRoundBufferMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, ballot::runtime::kRoundBufferTrimThreshold);
  mallopt(M_TOP_PAD, ballot::runtime::kRoundBufferTopPad);
#endif
}

int run(int argc, char** argv);

}  // namespace

// An exception that escapes a command (an allocation that failed, say) is reported as an error,
// not std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ballot: out of memory (an allocation failed)\n");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ballot: internal error: %s\n", error.what());
  }
  return 70;  // EX_SOFTWARE
}

namespace {

int run(int argc, char** argv) {
  using namespace ballot::apps;
  keep_round_buffers();
  CLI::App app{"Ballot: Byzantine-robust, communication-efficient distributed training"};
  app.require_subcommand(1);

  auto* info = app.add_subcommand("info", "Print the build configuration and the CPU kernel level");

  // `train --config FILE`: the file's values become the defaults that the flags then override,
  // so it is read before the command line is parsed.
  // The demo runs under attack: one Byzantine node (within the code's certified tolerance b = 1)
  // sends the reversed vote every round. `--attackers 0` trains without an adversary.
  TrainCommand train;
  train.config.training.attack = "reverse";
  train.config.training.attackers = 1;
  // Only `train` has --config, and nothing after `--` is ballot's (the nodes' own command line).
  std::string config_file;
  if (argc > 1 && std::string_view(argv[1]) == "train") {
    for (int i = 2; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--") break;
      if (arg == "--config" && i + 1 < argc) config_file = argv[++i];
      if (arg.starts_with("--config=")) config_file = std::string(arg.substr(9));
    }
  }
  if (!config_file.empty()) {
    auto loaded = ballot::runtime::load_cluster_config(config_file, ballot::runtime::ConfigUse::kTrainDefaults);
    if (!loaded.ok()) {
      std::fprintf(stderr, "ballot: %s\n", loaded.error().to_string().c_str());
      return 1;
    }
    train.config = *loaded;
  }
  auto* train_cmd =
      app.add_subcommand("train", "Train on a local cluster (server + n node processes over mutual TLS on loopback)");
  train_cmd->add_option("--config", config_file, "Cluster config JSON to start from (flags override it)");
  train_cmd->add_option("--work-dir", train.work_dir, "Keep keys, logs, metrics and checkpoints here");
  train_cmd->add_flag("--simulate", train.simulate, "Run in-process over the in-memory transport instead");
  train_cmd->add_flag("--lockstep", train.lockstep,
                      "Run in the lockstep experiment engine: the sessions on one thread in virtual time, each "
                      "partition computed once");
  add_training_flags(*train_cmd, train.config.training, train.config);
  std::string init_file;
  const auto init_help =
      "Train the model of this parameter file (ballot.torch.export_init): its nodes compute with their own "
      "framework; the server needs no model code";
  train_cmd->add_option("--init", init_file, init_help)->check(CLI::ExistingFile);
  train_cmd
      ->add_option("node-command", train.node_command,
                   "After --: the program and arguments each node runs instead of `ballot node` (e.g. python "
                   "train.py), with BALLOT_CLUSTER and BALLOT_NODE_INDEX in its environment")
      ->expected(-1);

  std::string cluster_file;
  std::optional<std::size_t> node_index;
  auto* server_cmd = app.add_subcommand("server", "Run the server role of a cluster");
  server_cmd->add_option("--cluster", cluster_file, "Cluster config JSON")->required();
  server_cmd->add_option("--init", init_file, init_help)->check(CLI::ExistingFile);
  auto* node_cmd = app.add_subcommand("node", "Run one node of a cluster");
  node_cmd->add_option("--cluster", cluster_file, "Cluster config JSON")->required();
  node_cmd->add_option("--index", node_index, "Node index i (row i of G; node id i+1)")
      ->check(whole_number_for<std::size_t>());
  auto* launch_cmd = app.add_subcommand(
      "launch",
      "Run the role given by the launcher's rank (OMPI_COMM_WORLD_RANK, RANK or SLURM_PROCID, innermost first)");
  launch_cmd->add_option("--cluster", cluster_file, "Cluster config JSON")->required();
  launch_cmd->add_option("--init", init_file, init_help)->check(CLI::ExistingFile);

  CodeCommand code;
  auto* code_cmd = app.add_subcommand(
      "code", "Report on an election code: matrix, redundancy, certified tolerance, Monte Carlo errors");
  code_cmd->add_option("spec", code.spec, "identity | bernoulli:r=2 | deterministic:b=B | paper5 | file:path=P")
      ->capture_default_str();
  code_cmd->add_option("-n,--nodes", code.nodes, "Number of nodes n")
      ->capture_default_str()
      ->check(whole_number_for<std::size_t>());
  code_cmd->add_option("-b,--byzantine", code.byzantine_counts, "Rows b of the Monte Carlo table")
      ->check(whole_number_for<std::size_t>());
  code_cmd->add_option("--q", code.q, "Probability that a partition's sign is correct")->capture_default_str();
  code_cmd->add_option("--attack", code.attack, "reverse | directional | random | opposite")->capture_default_str();
  code_cmd->add_flag("--abstain-ties", code.abstain_ties, "Ties abstain (the reference script's arithmetic)");
  code_cmd->add_option("--trials", code.trials, "Monte Carlo trials per cell")
      ->capture_default_str()
      ->check(whole_number_for<decltype(code.trials)>());
  code_cmd->add_option("--seed", code.seed, "Seed")
      ->capture_default_str()
      ->check(whole_number_for<decltype(code.seed)>());
  code_cmd->add_option("--search", code.search_b, "Instead: the minimum-redundancy code tolerating this b (n <= 9)")
      ->check(whole_number_for<std::size_t>());

  EvaluateCommand evaluate;
  auto* evaluate_cmd = app.add_subcommand(
      "evaluate",
      "Security evaluation: a grid of attacks x defences x Byzantine counts x seeds, with report and plots");
  add_evaluate_options(*evaluate_cmd, evaluate);

  auto* keys = app.add_subcommand("keys", "Manage the cluster PKI");
  keys->require_subcommand(1);
  std::string keys_dir = "keys";
  std::string ca_dir = "ca";
  std::uint32_t issue_id = 0;
  std::string issue_role = "node";
  std::string show_path = "keys";
  auto* keys_init = keys->add_subcommand("init", "Create the cluster CA");
  keys_init
      ->add_option("--dir", keys_dir, "Key directory: what the machines receive (ca.crt, node certificates and keys)")
      ->capture_default_str();
  keys_init->add_option("--ca-dir", ca_dir,
                        "CA directory: the CA key, which stays with the operator (default: ca beside --dir)");
  auto* keys_issue = keys->add_subcommand("issue", "Issue a node certificate and key");
  keys_issue->add_option("node-id", issue_id, "Node id (0 = server)")
      ->required()
      ->check(whole_number_for<std::uint32_t>());
  keys_issue->add_option("--role", issue_role, "server | node")->capture_default_str();
  keys_issue->add_option("--dir", keys_dir, "Key directory")->capture_default_str();
  keys_issue->add_option("--ca-dir", ca_dir, "CA directory (from keys init; default: ca beside --dir)");
  auto* keys_show = keys->add_subcommand("show", "Describe a certificate or every certificate of a directory");
  keys_show->add_option("path", show_path, "Certificate file or key directory")->capture_default_str();

  // CLI11 reports a mistyped subcommand as "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "ballot: unknown subcommand '%s' (known: %s); see ballot --help\n", argv[1], known.c_str());
      return 2;
    }
  }
  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) return run_info();
  if (train_cmd->parsed()) {
    auto& t = train.config.training;
    if (train_cmd->count("--attack") != 0 && train_cmd->count("--attackers") == 0) {
      // `--attack alie --byzantine 3`: as many attackers as the fault budget, unless a node list
      // says who.
      const bool listed = t.attacker_choice != "random" && t.attacker_choice != "worst";
      t.attackers = listed ? 0 : t.byzantine;
    } else if (config_file.empty() && t.rule != "vote" && train_cmd->count("--attack") == 0) {
      // The demo's default adversary reverses 1-bit votes, which the gradient path does not send:
      // there it runs without one unless asked, and `--attackers k` alone gets reverse's
      // gradient-domain analogue. (A config file's attack is the user's choice and stays.)
      t.attack = train_cmd->count("--attackers") == 0 || t.attackers == 0 ? "none" : "sign_flip";
      if (t.attack == "none") t.attackers = 0;
    }
    std::error_code ec;
    train.program = std::filesystem::canonical("/proc/self/exe", ec).string();
    if (!init_file.empty()) {
      auto spec = init_model_spec(init_file);
      if (!spec.ok()) {
        std::fprintf(stderr, "ballot: %s\n", spec.error().to_string().c_str());
        return 1;
      }
      t.model = *spec;
    }
    return run_train(train);
  }
  if (server_cmd->parsed()) return run_server_command(cluster_file, init_file);
  if (node_cmd->parsed()) return run_node_command(cluster_file, node_index);
  if (launch_cmd->parsed()) return run_launch_command(cluster_file, init_file);
  if (code_cmd->parsed()) return run_code(code);
  if (evaluate_cmd->parsed()) return run_evaluate(evaluate);
  if ((keys_init->parsed() && keys_init->count("--ca-dir") == 0) ||
      (keys_issue->parsed() && keys_issue->count("--ca-dir") == 0)) {
    // "ca" beside the key directory ("keys/" names the directory "keys").
    std::filesystem::path dir = keys_dir;
    while (!dir.empty() && !dir.has_filename() && dir.parent_path() != dir) dir = dir.parent_path();
    ca_dir = (dir.parent_path() / "ca").string();
  }
  if (keys_init->parsed()) return run_keys_init(keys_dir, ca_dir);
  if (keys_issue->parsed()) return run_keys_issue(keys_dir, ca_dir, issue_id, issue_role);
  if (keys_show->parsed()) return run_keys_show(show_path);
  return 0;
}

}  // namespace
