// `ballot train`, `ballot server`, `ballot node`, `ballot launch`: the training runtime.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/commands.h"
#include "apps/launcher_env.h"
#include "core/file_io.h"
#include "core/json_nesting.h"
#include "core/spec.h"
#include "runtime/cluster.h"
#include "runtime/experiment.h"
#include "runtime/simulator.h"
#include "transport/crypto.h"

namespace ballot::apps {
namespace {

int fail(const Error& error) {
  std::fprintf(stderr, "ballot: %s\n", error.to_string().c_str());
  return 1;
}

// Ctrl-C, SIGTERM or SIGHUP while a local cluster runs: the server is stopped and the command
// returns normally, so that its clean-up (the throw-away keys) runs.
std::atomic<bool> g_stop_cluster{false};
extern "C" void on_stop_signal(int) { g_stop_cluster = true; }

class StopSignals {
 public:
  StopSignals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: the signal interrupts waitpid
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~StopSignals() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

std::string human_bytes(double bytes) {
  char text[32];
  if (bytes >= 1e6) {
    std::snprintf(text, sizeof(text), "%.2f MB", bytes / 1e6);
  } else if (bytes >= 1e3) {
    std::snprintf(text, sizeof(text), "%.1f KB", bytes / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.0f B", bytes);
  }
  return text;
}

// The rows of a metrics file from before `first_round`: a server that resumed from a checkpoint
// redoes the rounds after it, and each round keeps one row (the one of the run that counts).
void drop_metrics_from(const std::filesystem::path& metrics, std::uint64_t first_round) {
  std::ifstream in(metrics);
  if (!in) return;
  std::string kept;
  bool dropped = false;
  for (std::string line; std::getline(in, line);) {
    const auto row = json_nesting_ok(line) ? nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false)
                                           : nlohmann::json(nlohmann::json::value_t::discarded);
    if (row.is_object() && row.contains("round") && row["round"].is_number_unsigned() &&
        row["round"].get<std::uint64_t>() >= first_round) {
      dropped = true;
      continue;
    }
    kept += line + '\n';
  }
  in.close();
  if (!dropped) return;
  // Whole or not at all: a full disk leaves the old file (with the rows this run will write again).
  // The file keeps its permissions.
  std::error_code ec;
  const auto permissions = std::filesystem::status(metrics, ec).permissions();
  (void)write_file_atomically(metrics, std::span(reinterpret_cast<const std::uint8_t*>(kept.data()), kept.size()),
                              ec ? 0644 : static_cast<mode_t>(permissions) & 0777);
}

// A metrics file that cannot be written is an error before round 0, not rows lost silently.
Status check_metrics_file(const std::filesystem::path& path) {
  if (path.empty()) return {};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(ErrorCode::kInvalidArgument, "metrics: '" + path.string() + "' is a directory");
  std::ofstream probe(path, std::ios::app);  // creates it, or appends nothing to it
  if (!probe) return make_error(ErrorCode::kIo, "metrics: cannot write '" + path.string() + "'");
  return {};
}

// Progress on the terminal and metrics as JSON lines, from the server's round reports.
class Progress {
 public:
  Progress(std::uint64_t rounds, const std::filesystem::path& metrics) : rounds_(rounds), path_(metrics) {}

  void operator()(const runtime::RoundReport& report) {
    if (!opened_ && !path_.empty()) {
      opened_ = true;
      drop_metrics_from(path_, report.round);
      metrics_.open(path_, std::ios::app);
    }
    if (metrics_) metrics_ << runtime::metrics_json_line(report) << '\n' << std::flush;
    if (!path_.empty() && !metrics_ && !warned_) {  // checked writable before round 0; lost since
      warned_ = true;
      std::fprintf(stderr, "ballot: warning: cannot write the metrics file %s any more\n", path_.c_str());
    }
    const bool missing_changed = report.missing != last_missing_ || report.quarantined != last_quarantined_;
    last_missing_ = report.missing;
    last_quarantined_ = report.quarantined;
    // The first round, then every 25th as displayed (1-based: 25, 50, …, where evaluations fall).
    if (!report.evaluated && !missing_changed && report.round != 0 && (report.round + 1) % 25 != 0) return;
    const auto list = [](const std::vector<std::size_t>& nodes) {
      std::string text;
      for (auto node : nodes) {
        if (!text.empty()) text += ',';
        text += std::to_string(node);
      }
      return text.empty() ? std::string("-") : text;
    };
    const std::string missing = list(report.missing);
    std::string accuracy = "      ";
    if (report.evaluated) {
      char text[16];
      std::snprintf(text, sizeof(text), "%5.1f%%", 100.0 * report.test.accuracy);
      accuracy = text;
    }
    const double ratio = report.bytes_per_vote ? static_cast<double>(report.fp32_bytes) / report.bytes_per_vote : 0;
    std::printf(
        "round %5llu/%llu  loss %.4f  test acc %s  votes %zu  missing %-6s  quarantined %-4s  up %s/node (fp32 %s, "
        "%.1fx)  down %s  %.3f s/round\n",
        static_cast<unsigned long long>(report.round + 1), static_cast<unsigned long long>(rounds_), report.mean_loss,
        accuracy.c_str(), report.votes, missing.c_str(), list(report.quarantined).c_str(),
        human_bytes(static_cast<double>(report.bytes_per_vote)).c_str(),
        human_bytes(static_cast<double>(report.fp32_bytes)).c_str(), ratio,
        human_bytes(static_cast<double>(report.bytes_per_decision)).c_str(), report.seconds);
    std::fflush(stdout);
  }

 private:
  std::uint64_t rounds_;
  std::filesystem::path path_;
  bool opened_ = false;
  bool warned_ = false;
  std::ofstream metrics_;
  std::vector<std::size_t> last_missing_;
  std::vector<std::size_t> last_quarantined_;
};

// What the defences did over a run: the end of every training summary.
void print_defences(const runtime::DefenceReport& d) {
  std::string events;
  for (const auto& [node, count] : d.misbehaviour) {
    if (!events.empty()) events += ", ";
    events += "node " + std::to_string(node) + ": " + std::to_string(count);
  }
  std::string quarantined;
  for (auto node : d.quarantined) {
    if (!quarantined.empty()) quarantined += ',';
    quarantined += std::to_string(node);
  }
  const auto per_node = [](const std::vector<std::pair<std::size_t, std::uint64_t>>& counts) {
    std::string text;
    for (const auto& [node, count] : counts) {
      if (!text.empty()) text += ", ";
      text += "node " + std::to_string(node) + ": " + std::to_string(count);
    }
    return text;
  };
  std::printf(
      "defences: %llu messages rejected by the server, %llu votes on another model, misbehaviour events {%s}, "
      "quarantined {%s}, %zu equivocation proofs\n",
      static_cast<unsigned long long>(d.rejected_messages), static_cast<unsigned long long>(d.out_of_sync_votes),
      events.c_str(), quarantined.c_str(), d.equivocation_proofs);
  std::printf(
      "lateness (counted, never quarantined): {%s}; second sessions refused for a live node id: {%s}; connections "
      "refused before authentication: %llu\n",
      per_node(d.late).c_str(), per_node(d.duplicate_sessions).c_str(),
      static_cast<unsigned long long>(d.unauthenticated));
}

void print_summary(const runtime::TrainingSummary& summary) {
  if (summary.replayed_decisions != 0) {
    std::printf("\nresumed at round %llu: its checkpoint, then %llu decisions replayed from its decision log\n",
                static_cast<unsigned long long>(summary.first_round),
                static_cast<unsigned long long>(summary.replayed_decisions));
  }
  if (summary.test.count == 0) {
    std::printf(
        "\ndone: %llu rounds (from round %llu) in %.1f s; no test evaluation on the server (a parameters-only "
        "model, or no test set)\n",
        static_cast<unsigned long long>(summary.rounds), static_cast<unsigned long long>(summary.first_round),
        summary.seconds);
  } else {
    std::printf("\ndone: %llu rounds (from round %llu) in %.1f s; test accuracy %.2f%%, test loss %.4f\n",
                static_cast<unsigned long long>(summary.rounds), static_cast<unsigned long long>(summary.first_round),
                summary.seconds, 100.0 * summary.test.accuracy, summary.test.loss);
  }
  std::printf("model digest: %s\n", transport::to_hex(summary.model_digest).c_str());
  print_defences(summary.defences);
}

// The built-in nodes (`ballot node`, the simulator, the lockstep engine) compute with the model's
// forward pass; a parameters-only model has none.
Status require_builtin_nodes(const runtime::TrainingOptions& training) {
  if (training.model.rfind("init:", 0) != 0) return {};
  return make_error(ErrorCode::kInvalidArgument,
                    "model '" + training.model +
                        "' is a parameter file: Ballot's own nodes cannot compute on it. Run its nodes with their "
                        "framework (ballot.torch.Node; locally `python -m ballot.torch.run`, or `ballot train --init "
                        "FILE -- python train.py`)");
}

}  // namespace

Result<std::string> init_model_spec(const std::string& init_file) {
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(init_file, ec);
  const std::string path = ec ? init_file : absolute.lexically_normal().string();
  const std::string spec = "init:file=" + path;
  const auto parsed = Spec::parse(spec);
  if (!parsed.ok() || parsed->get_string("file", "") != path || parsed->options().size() != 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--init '" + init_file +
                          "': the model spec init:file=PATH cannot hold this path (',', '>' or surrounding spaces); "
                          "rename the file or link it under another name");
  }
  return spec;
}

int run_train(TrainCommand command) {
  auto& config = command.config;
  if (auto status = config.training.validate(); !status.ok()) return fail(status.error());
  std::printf(
      "ballot train: n = %zu nodes, b = %zu, code %s (%s placement), model %s, update %s, lr %s, %llu rounds, data "
      "%s\n",
      config.training.nodes, config.training.byzantine, config.training.code.c_str(),
      std::string(runtime::placement_name(config.training.placement)).c_str(), config.training.model.c_str(),
      config.training.update.c_str(), config.training.lr.c_str(),
      static_cast<unsigned long long>(config.training.rounds), config.training.data.c_str());
  if (config.training.attack != "none") {
    auto code = runtime::make_code(config.training);
    if (!code.ok()) return fail(code.error());
    auto chosen = runtime::choose_attackers(config.training, *code);
    if (!chosen.ok()) return fail(chosen.error());
    std::string who;
    for (auto i : *chosen) {
      if (!who.empty()) who += ", ";
      who += std::to_string(i);
    }
    if (!chosen->empty()) {
      std::printf("adversary: node%s %s (%s) do%s '%s'\n", chosen->size() > 1 ? "s" : "", who.c_str(),
                  config.training.attacker_choice.c_str(), chosen->size() > 1 ? "" : "es",
                  config.training.attack.c_str());
    }
  }
  if (command.lockstep || command.simulate || command.node_command.empty()) {
    if (auto status = require_builtin_nodes(config.training); !status.ok()) return fail(status.error());
  }
  if (command.lockstep || command.simulate) {
    // The in-process engines keep no keys, logs or checkpoints; of the work directory they use
    // the metrics file, which goes there unless --metrics names another (no --work-dir: none).
    if (!command.work_dir.empty() && config.metrics.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(command.work_dir, ec);
      if (ec) return fail(make_error(ErrorCode::kIo, "--work-dir '" + command.work_dir + "': " + ec.message()));
      config.metrics = std::filesystem::path(command.work_dir) / "metrics.jsonl";
    }
    if (auto status = check_metrics_file(config.metrics); !status.ok()) return fail(status.error());
  }
  if (command.lockstep) {
    if (config.relay_decisions) {
      return fail(make_error(ErrorCode::kInvalidArgument,
                             "--relay-decisions: the lockstep engine sends every decision whole (use the cluster or "
                             "--simulate)"));
    }
    auto data = runtime::load_training_data(config.training);
    if (!data.ok()) return fail(data.error());
    auto setup = runtime::make_training_setup(config.training,
                                              std::make_shared<const learning::TrainTestSplit>(std::move(*data)));
    if (!setup.ok()) return fail(setup.error());
    std::ofstream metrics;
    // A new run's rows replace an earlier run's, as the cluster's and the simulator's do.
    if (!config.metrics.empty()) metrics.open(config.metrics, std::ios::trunc);
    runtime::ExperimentOptions options;
    options.round_deadline = std::chrono::milliseconds(config.round_deadline_ms);  // virtual time
    options.on_round = [&](const runtime::ExperimentRound& round) {
      if (metrics) metrics << runtime::experiment_json_line(round) << '\n';
      if (!round.evaluated) return;
      std::printf("round %5llu/%llu  loss %.4f  test acc %5.1f%%  votes %zu  coordinates changed by the attack %zu\n",
                  static_cast<unsigned long long>(round.round + 1),
                  static_cast<unsigned long long>(config.training.rounds), round.mean_loss, 100.0 * round.test.accuracy,
                  round.votes, round.changed_coordinates);
      std::fflush(stdout);
    };
    auto result = runtime::run_experiment(*setup, options);
    if (!result.ok()) return fail(result.error());
    std::printf(
        "\ndone: %zu rounds in %.1f s; test accuracy %.2f%%, test loss %.4f; the attack changed the decision in "
        "%llu rounds\n",
        result->rounds.size(), result->seconds, 100.0 * result->test.accuracy, result->test.loss,
        static_cast<unsigned long long>(result->rounds_changed));
    std::printf("model digest: %s\n", transport::to_hex(result->model_digest).c_str());
    print_defences(result->defences);
    return 0;
  }
  if (command.simulate) {
    auto data = runtime::load_training_data(config.training);
    if (!data.ok()) return fail(data.error());
    auto setup = runtime::make_training_setup(config.training,
                                              std::make_shared<const learning::TrainTestSplit>(std::move(*data)));
    if (!setup.ok()) return fail(setup.error());
    Progress progress(config.training.rounds, config.metrics);
    runtime::SimulationOptions options;
    options.server.round_deadline = std::chrono::milliseconds(config.round_deadline_ms);
    options.server.relay_decisions = config.relay_decisions;
    options.server.on_round = [&](const runtime::RoundReport& report) { progress(report); };
    auto result = runtime::simulate(*setup, options);
    if (!result.ok()) return fail(result.error());
    print_summary(result->server);
    return 0;
  }

  const bool temporary = command.work_dir.empty();
  // Absolute, so that the cluster file written there (keys, checkpoint, metrics, node state) works
  // from any directory: `ballot node --cluster DIR/cluster.json` restarts a node from anywhere.
  std::filesystem::path work_dir = command.work_dir;
  if (!temporary) {
    std::error_code ec;
    work_dir = std::filesystem::absolute(work_dir, ec);
    if (ec) return fail(make_error(ErrorCode::kIo, "--work-dir '" + command.work_dir + "': " + ec.message()));
  }
  if (temporary) {
    char pattern[] = "/tmp/ballot-train-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return fail(make_error(ErrorCode::kIo, "cannot create a temporary directory"));
    work_dir = pattern;
  }
  // The throw-away PKI of a temporary directory (the CA key among it) goes when the command ends:
  // done, failed, or stopped by SIGINT, SIGTERM or SIGHUP (StopSignals; SIGKILL leaves it). The
  // logs stay. Declared before the cluster, so its processes are gone first.
  struct ThrowAwayKeys {
    std::filesystem::path dir;
    ~ThrowAwayKeys() {
      if (dir.empty()) return;
      std::error_code ignored;
      std::filesystem::remove_all(dir / "keys", ignored);
      std::filesystem::remove_all(dir / "ca", ignored);
    }
  } throw_away{temporary ? work_dir : std::filesystem::path()};
  StopSignals signals;
  if (config.metrics.empty()) config.metrics = work_dir / "metrics.jsonl";
  if (config.checkpoint.empty()) config.checkpoint = work_dir / "server.ckpt";
  if (config.node_state.empty()) config.node_state = work_dir;
  {
    std::error_code ec;  // where the default metrics file goes (LocalCluster::prepare says why it cannot)
    std::filesystem::create_directories(work_dir, ec);
  }
  if (auto status = check_metrics_file(config.metrics); !status.ok()) return fail(status.error());
  auto cluster = runtime::LocalCluster::prepare(config, command.program, work_dir, command.node_command);
  if (!cluster.ok()) return fail(cluster.error());
  std::printf(
      "local cluster: 1 server + %zu node processes on 127.0.0.1:%u, mutual TLS 1.3, Ed25519-signed messages\n"
      "work directory: %s (keys, cluster.json, logs, metrics.jsonl)\n",
      config.training.nodes, cluster->config().server_port, work_dir.c_str());
  std::fflush(stdout);
  if (auto status = cluster->start_server(/*show_output=*/true); !status.ok()) return fail(status.error());
  if (auto status = cluster->start_all_nodes(); !status.ok()) return fail(status.error());
  auto exit_code = cluster->wait(std::chrono::milliseconds(10000), &g_stop_cluster);
  if (!exit_code.ok()) return fail(exit_code.error());
  if (g_stop_cluster) {
    std::fprintf(stderr, "ballot: stopped by a signal; logs are in %s\n", work_dir.c_str());
    return 130;
  }
  if (*exit_code != 0) {
    std::fprintf(stderr, "ballot: the server exited with status %d; logs are in %s\n", *exit_code, work_dir.c_str());
    return *exit_code;
  }
  std::printf("metrics: %s\n", cluster->config().metrics.c_str());
  return 0;
}

namespace {

int serve(const runtime::ClusterConfig& config) {
  if (!config.checkpoint.empty() && config.node_state.empty()) {
    std::fprintf(stderr,
                 "ballot: warning: the cluster file sets \"checkpoint\" but not \"node_state\": after a server "
                 "restart, nodes without their saved state abstain in the redone rounds and no quorum forms "
                 "(docs/multi_machine.md)\n");
  }
  if (auto status = check_metrics_file(config.metrics); !status.ok()) return fail(status.error());
  Progress progress(config.training.rounds, config.metrics);
  runtime::ServerOptions options;
  options.on_round = [&](const runtime::RoundReport& report) { progress(report); };
  auto summary = runtime::run_server(config, options);
  if (!summary.ok()) return fail(summary.error());
  print_summary(*summary);
  return 0;
}

int work(const runtime::ClusterConfig& config, std::size_t index) {
  auto summary = runtime::run_node(config, index);
  if (!summary.ok()) return fail(summary.error());
  std::printf(
      "node %zu: %llu rounds, %llu votes, %llu state transfers, %llu messages withheld (signed differently before)\n",
      index, static_cast<unsigned long long>(summary->rounds), static_cast<unsigned long long>(summary->votes_sent),
      static_cast<unsigned long long>(summary->rejoins), static_cast<unsigned long long>(summary->abstained));
  // The model it ends with: equal to the server's digest when it applied every decision.
  std::printf("node %zu: model digest: %s\n", index, transport::to_hex(summary->model_digest).c_str());
  if (config.training.placement == runtime::Placement::kExchange) {
    std::printf("node %zu: exchange inputs: %llu missing (abstained), %llu rejected\n", index,
                static_cast<unsigned long long>(summary->inputs_missing),
                static_cast<unsigned long long>(summary->inputs_rejected));
  }
  if (config.relay_decisions) {
    std::printf("node %zu: decision pieces relayed %llu, decisions asked for whole %llu\n", index,
                static_cast<unsigned long long>(summary->pieces_relayed),
                static_cast<unsigned long long>(summary->decisions_requested));
  }
  return 0;
}

}  // namespace

int run_server_command(const std::string& cluster_file, const std::string& init_file) {
  auto config = runtime::load_cluster_config(cluster_file);
  if (!config.ok()) return fail(config.error());
  if (!init_file.empty()) {
    auto spec = init_model_spec(init_file);
    if (!spec.ok()) return fail(spec.error());
    config->training.model = *spec;
  }
  return serve(*config);
}

int run_node_command(const std::string& cluster_file, std::optional<std::size_t> index) {
  auto config = runtime::load_cluster_config(cluster_file);
  if (!config.ok()) return fail(config.error());
  if (auto status = require_builtin_nodes(config->training); !status.ok()) return fail(status.error());
  if (!index)
    return fail(make_error(ErrorCode::kInvalidArgument, "give --index (or use `ballot launch` under a launcher)"));
  return work(*config, *index);
}

int run_launch_command(const std::string& cluster_file, const std::string& init_file) {
  const auto rank = launch_rank_from_environment();
  const std::string malformed = malformed_launcher_variables();
  if (!rank) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           "no launcher rank in the environment (OMPI_COMM_WORLD_RANK, RANK or SLURM_PROCID)" +
                               (malformed.empty() ? std::string() : "; not a rank or size: " + malformed)));
  }
  if (!malformed.empty()) {
    std::fprintf(stderr, "ballot: warning: %s: rank %d; ignored, not a rank or size: %s\n", rank->source.c_str(),
                 rank->rank, malformed.c_str());
  }
  auto config = runtime::load_cluster_config(cluster_file);
  if (!config.ok()) return fail(config.error());
  if (!init_file.empty()) {
    auto spec = init_model_spec(init_file);
    if (!spec.ok()) return fail(spec.error());
    config->training.model = *spec;
  }
  if (rank->rank != 0) {
    if (auto status = require_builtin_nodes(config->training); !status.ok()) return fail(status.error());
  }
  // The server's address is the cluster file's, under every launcher. torchrun's MASTER_ADDR and
  // MASTER_PORT are its own rendezvous store: under its static rendezvous (--master_addr and
  // --master_port, the many-machine form) rank 0's agent holds that port, so the server could not
  // listen there, and the Python nodes (ballot.torch) dial the file's address.
  if (rank->world_size != 0 && static_cast<std::size_t>(rank->world_size) != config->training.nodes + 1) {
    return fail(make_error(ErrorCode::kInvalidArgument,
                           rank->size_source + " (beside " + rank->source + "): the launcher started " +
                               std::to_string(rank->world_size) +
                               " processes, the cluster needs n + 1 = " + std::to_string(config->training.nodes + 1)));
  }
  if (rank->rank == 0) return serve(*config);
  return work(*config, static_cast<std::size_t>(rank->rank - 1));
}

}  // namespace ballot::apps
