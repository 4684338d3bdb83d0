// `ballot evaluate`: a grid of attacks × defences × numbers of Byzantine nodes × seeds on the
// lockstep engine (evaluation/), with results.json, report.md and SVG plots in --out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/commands.h"
#include "apps/whole_number.h"
#include "evaluation/grid.h"
#include "evaluation/progress.h"
#include "evaluation/report.h"
#include "evaluation/runner.h"

namespace ballot::apps {
namespace {

std::atomic<bool> g_interrupted{false};

// The first Ctrl-C cancels the grid (running cells stop after their round, the report is written
// with what finished); the handler then steps aside so that a second one ends the process.
extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

int fail(const Error& error) {
  std::fprintf(stderr, "ballot evaluate: %s\n", error.to_string().c_str());
  return 1;
}

Error bad_flag(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, why); }

Result<std::vector<std::uint64_t>> parse_numbers(const std::string& flag, const std::string& text) {
  std::vector<std::uint64_t> values;
  for (const auto& piece : evaluation::split_list(text)) {
    std::uint64_t value = 0;
    std::size_t used = 0;
    try {
      if (piece.empty() || piece[0] == '-') throw std::invalid_argument(piece);
      value = std::stoull(piece, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != piece.size() || used == 0) return bad_flag(flag + ": '" + piece + "' is not a non-negative integer");
    values.push_back(value);
  }
  if (values.empty()) return bad_flag(flag + ": empty list");
  return values;
}

// The command line as typed (for the report), the program shown as `ballot`.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t start = 0;
  bool first = true;
  while (start < all.size()) {
    auto end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    start = end + 1;
    if (first) {
      arg = "ballot";
      first = false;
    } else if (arg.find_first_of(" '\"$*?;&|<>()") != std::string::npos || arg.empty()) {
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    if (!out.empty()) out += ' ';
    out += arg;
  }
  return out;
}

Result<evaluation::Grid> build_grid(const EvaluateCommand& c) {
  evaluation::Grid grid;
  if (c.preset) {
    if (*c.preset != "paper") return bad_flag("--preset: unknown preset '" + *c.preset + "' (known: paper)");
    if (c.grid_file) return bad_flag("give --preset or --grid, not both");
    grid = evaluation::paper_preset(c.rounds.value_or(evaluation::kPaperPresetRounds));
  }
  if (c.grid_file) {
    BALLOT_ASSIGN_OR_RETURN(grid, evaluation::load_grid(*c.grid_file, grid));
  }
  auto& base = grid.base;
  if (c.rounds) base.rounds = *c.rounds;
  if (c.data) base.data = *c.data;
  if (c.model) base.model = *c.model;
  if (c.lr) {
    // One schedule for every defence without its own: the user's choice over the update rules'
    // defaults (the report shows it per defence).
    base.lr = *c.lr;
    grid.lr_per_update = false;
  }
  if (c.update) base.update = *c.update;
  if (c.worker_momentum) base.worker_momentum = *c.worker_momentum;
  if (c.partition_size) base.partition_size = *c.partition_size;
  if (c.eval_every) base.eval_every = *c.eval_every;
  if (c.eval_examples) base.eval_examples = *c.eval_examples;
  if (c.attacks) {
    grid.attacks = evaluation::split_list(*c.attacks);
    // `--attacks ''` or `--attacks ,` would silently leave only the attack-free cells.
    if (grid.attacks.empty()) return bad_flag("--attacks '" + *c.attacks + "' names no attack");
  }
  if (c.defences) {
    grid.defences.clear();
    for (const auto& name : evaluation::split_list(*c.defences)) {
      auto defence = evaluation::named_defence(name);
      if (!defence.ok()) return bad_flag("--defences: " + defence.error().message);
      grid.defences.push_back(std::move(*defence));
    }
  }
  if (c.nodes || c.byzantine) {
    std::vector<std::uint64_t> nodes, byzantine;
    for (const auto& s : grid.settings) {
      if (std::find(nodes.begin(), nodes.end(), s.nodes) == nodes.end()) nodes.push_back(s.nodes);
      if (std::find(byzantine.begin(), byzantine.end(), s.byzantine) == byzantine.end())
        byzantine.push_back(s.byzantine);
    }
    if (c.nodes) {
      BALLOT_ASSIGN_OR_RETURN(nodes, parse_numbers("--nodes", *c.nodes));
    }
    if (c.byzantine) {
      BALLOT_ASSIGN_OR_RETURN(byzantine, parse_numbers("--byzantine", *c.byzantine));
    }
    if (nodes.empty() || byzantine.empty())
      return bad_flag("give both --nodes and --byzantine (or a grid that has settings)");
    grid.settings.clear();
    for (auto n : nodes) {
      for (auto b : byzantine) grid.settings.push_back({n, b});
    }
  }
  if (c.seeds) {
    BALLOT_ASSIGN_OR_RETURN(grid.seeds, parse_numbers("--seeds", *c.seeds));
  }
  if (c.attacker_choice) grid.attacker_choice = *c.attacker_choice;
  if (c.target) grid.target_accuracy = *c.target;
  if (c.no_baseline) grid.baseline = false;
  if (c.protocol_deadline_ms) grid.protocol_deadline_ms = *c.protocol_deadline_ms;
  if (c.tune_lr || c.tune_lr_factors || c.tune_lr_rounds) {
    evaluation::LrTuning tuning = grid.tune_lr.value_or(evaluation::LrTuning{});
    if (c.tune_lr_factors) {
      tuning.factors.clear();
      for (const auto& piece : evaluation::split_list(*c.tune_lr_factors)) {
        std::size_t used = 0;
        double factor = 0.0;
        try {
          factor = std::stod(piece, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != piece.size()) return bad_flag("--tune-lr-factors: '" + piece + "' is not a number");
        tuning.factors.push_back(factor);
      }
    }
    if (c.tune_lr_rounds) tuning.rounds = *c.tune_lr_rounds;
    grid.tune_lr = tuning;
  }
  if (auto status = grid.validate(); !status.ok()) {
    auto error = status.error();
    const bool empty = error.message.find("no setting") != std::string::npos ||
                       error.message.find("no defence") != std::string::npos ||
                       error.message.find("nothing to run") != std::string::npos;
    if (empty && !c.preset && !c.grid_file)
      error.message +=
          " (start from --preset paper or --grid FILE, or give --attacks, --defences, --nodes and --byzantine)";
    return error;
  }
  return grid;
}

// What the paper preset's report says about its setup (docs/evaluation_paper_preset.md).
std::string paper_preamble(const evaluation::Grid& grid) {
  return "The election-coding paper's setups (Sohn et al., NeurIPS 2020; docs/election_coding.md): the reverse attack "
         "by b "
         "Byzantine nodes drawn uniformly from the seed, on Fashion-MNIST, comparing signSGD with majority vote "
         "(G = I), random Bernoulli codes with nominal r = 2 and 3 (redrawn until no row is empty, so the realised r "
         "in the `r` column is higher on average; one draw may be lower) and the paper's deterministic code built for "
         "each b. The update is "
         "`ballot train`'s default — Signum with majority vote (a momentum of " +
         std::to_string(grid.base.worker_momentum).substr(0, 4) +
         " per partition at the nodes, x ← x − η·v at every replica) — rather than the paper's server-side heavy "
         "ball at lr 1e-4, which was not tuned or measured for this budget. Every cell's exact options are in "
         "results.json.";
}

}  // namespace

void add_evaluate_options(CLI::App& command, EvaluateCommand& c) {
  command.add_option("--preset", c.preset, "A built-in grid: paper (the election-coding paper's setups)");
  command.add_option("--grid", c.grid_file, "Grid file (JSON; docs/evaluation.md); flags override its values");
  command.add_option("--attacks", c.attacks, "Attacks, comma-separated: reverse,random,'ipm:eps=0.5',alie …");
  command.add_option("--defences", c.defences,
                     "Defences, comma-separated: signSGD-MV | 'bernoulli r=2' | deterministic | paper5 | RULE/CODEC "
                     "(e.g. median/fp32, 'trimmed_mean:f=1/fp32')");
  command.add_option("--nodes", c.nodes, "Numbers of nodes n, comma-separated (crossed with --byzantine)");
  command.add_option("--byzantine", c.byzantine, "Numbers of Byzantine nodes b, comma-separated");
  command.add_option("--seeds", c.seeds, "Seeds, comma-separated (default 1)");
  command.add_option("--byzantine-nodes", c.attacker_choice,
                     "Which nodes attack: random (from the seed) | worst (for G) | 0,3");
  command.add_option("--rounds", c.rounds, "Training rounds per cell (paper preset: 500)")
      ->check(whole_number_for<std::uint64_t>());
  command.add_option("--target", c.target, "Test accuracy for the 'rounds to target' table (default 0.8)");
  command.add_option("--data", c.data, "fashion-mnist[:dir=D] | mnist:dir=D | synthetic[:…]");
  command.add_option("--model", c.model, "Model: logreg | mlp:hidden=128 | cnn");
  command.add_option(
      "--lr", c.lr, "Learning-rate schedule for every defence (default: each update rule's own, learning/optimizer.h)");
  command.add_option("--update", c.update, "Update rule on the vote / aggregate (a defence may set its own)");
  command.add_option("--worker-momentum", c.worker_momentum, "Signum momentum at the nodes (0 = signSGD)");
  command.add_option("--partition-size", c.partition_size, "Examples per partition")
      ->check(whole_number_for<std::size_t>());
  command.add_option("--eval-every", c.eval_every, "Rounds between test evaluations (the accuracy curve)")
      ->check(whole_number_for<std::uint64_t>());
  command.add_option("--eval-examples", c.eval_examples, "Test examples per evaluation")
      ->check(whole_number_for<std::size_t>());
  command.add_flag("--no-baseline", c.no_baseline, "Do not run the attack-free cells");
  command.add_flag("--tune-lr", c.tune_lr,
                   "Before the grid, sweep each defence's learning rate on its attack-free cell (held-out data) and "
                   "use the best");
  command.add_option(
      "--tune-lr-factors", c.tune_lr_factors,
      "Multiples of the untuned learning rate the sweep tries (default 0.1,0.3,1,3,10); implies --tune-lr");
  command
      .add_option("--tune-lr-rounds", c.tune_lr_rounds,
                  "Rounds of each sweep run (default: --rounds); implies --tune-lr")
      ->check(whole_number_for<std::uint64_t>(1));
  command
      .add_option("--protocol-deadline-ms", c.protocol_deadline_ms,
                  "Round deadline in virtual time, where protocol attacks withhold or delay votes (default 300)")
      ->check(whole_number_for<std::uint32_t>(1));
  command.add_option("-j,--jobs", c.jobs, "Cells run in parallel (threads)")
      ->capture_default_str()
      ->check(whole_number_for<std::size_t>());
  command.add_option("-o,--out", c.out, "Output directory: results.json, report.md, figures/")->capture_default_str();
  command.add_option("--title", c.title, "Title of report.md");
}

int run_evaluate(const EvaluateCommand& command) {
  auto grid = build_grid(command);
  if (!grid.ok()) return fail(grid.error());
  if (command.jobs == 0) return fail(bad_flag("--jobs must be at least 1"));

  const auto cells = evaluation::expand(*grid);
  std::size_t to_run = 0, not_applicable = 0;
  for (const auto& cell : cells) {
    if (cell.same_as) continue;
    ++to_run;
    if (cell.not_applicable) ++not_applicable;
  }
  // The progress bar counts the learning-rate sweep's cells too.
  const auto [all_cells, work] = evaluation::grid_work(*grid);
  const std::size_t sweep_cells = all_cells - to_run;
  std::printf(
      "ballot evaluate: %zu attack(s)%s x %zu defence(s) x %zu setting(s) x %zu seed(s): %zu cells to run "
      "(%zu not applicable), %llu rounds each, %zu jobs, data %s\n",
      grid->attacks.size(), grid->baseline ? " + no attack" : "", grid->defences.size(), grid->settings.size(),
      grid->seeds.size(), to_run, not_applicable, static_cast<unsigned long long>(grid->base.rounds), command.jobs,
      grid->base.data.c_str());
  if (sweep_cells > 0) {
    std::printf(
        "ballot evaluate: first a learning-rate sweep of %zu cells (factors of each defence's rate on its "
        "attack-free cell, scored on held-out training examples)\n",
        sweep_cells);
  }
  std::fflush(stdout);

  if (auto status = evaluation::prepare_report_dir(command.out); !status.ok()) return fail(status.error());
  auto data = runtime::load_training_data(grid->base);
  if (!data.ok()) return fail(data.error());
  const auto shared = std::make_shared<const learning::TrainTestSplit>(std::move(*data));

  evaluation::ProgressBar progress(stdout, evaluation::ProgressBar::is_terminal(stdout), all_cells, work);
  evaluation::RunnerOptions options;
  options.jobs = command.jobs;
  options.progress = &progress;
  options.cancelled = [] { return g_interrupted.load(); };
  auto previous = std::signal(SIGINT, on_interrupt);
  auto result = evaluation::run_grid(*grid, shared, options);
  std::signal(SIGINT, previous);
  if (!result.ok()) return fail(result.error());

  evaluation::ReportOptions report;
  report.command = command_line();
  if (command.title) {
    report.title = *command.title;
  } else if (command.preset) {
    report.title = "Security evaluation: the election-coding paper's setups";
  }
  if (command.preset && *command.preset == "paper") report.preamble = paper_preamble(*grid);
  if (auto status = evaluation::write_report(*result, command.out, report); !status.ok()) return fail(status.error());
  std::printf("%s%.1f s; wrote %s/results.json, %s/report.md and %s/figures/\n",
              result->cancelled ? "cancelled after " : "done in ", result->seconds, command.out.c_str(),
              command.out.c_str(), command.out.c_str());
  if (result->cancelled) return 130;
  // The report holds every cell; a failed one (an option its training refused, say) is still a
  // failed command, so that scripts notice.
  const auto failed = std::count_if(result->results.begin(), result->results.end(),
                                    [](const auto& cell) { return cell.status == evaluation::CellStatus::kFailed; });
  if (failed > 0) {
    std::fprintf(stderr, "ballot evaluate: %lld of %zu cells failed (their errors are in report.md)\n",
                 static_cast<long long>(failed), result->results.size());
    return 1;
  }
  return 0;
}

}  // namespace ballot::apps
