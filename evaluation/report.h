// Results of an evaluation grid as files: results.json (every cell with its options, metrics and
// curve), report.md (per setting (n, b): final accuracy per defence × attack as mean ± sd over
// seeds with the worst case over attacks, rounds to the target accuracy, the fraction of rounds
// whose vote the attack changed; a worst-case-against-b table) and SVG plots (evaluation/svg.h):
// accuracy against rounds per attack (one figure per setting, a panel per defence) and worst-case
// accuracy against b per defence (a panel per n).
//
// Aggregation over seeds counts finished cells only ("done"); the standard deviation is the
// sample one (n − 1), 0 for a single seed. The worst case of a defence in a setting is the lowest
// mean accuracy over the attacks (the baseline excluded) — marked incomplete when some applicable
// attack did not finish (failed or cancelled). Thread-safety: pure functions, except write_report (files).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "evaluation/runner.h"
#include "evaluation/svg.h"

namespace ballot::evaluation {

struct Stats {
  double mean = 0.0;
  double sd = 0.0;
  std::size_t count = 0;  // 0: mean and sd meaningless
};
Stats mean_sd(std::span<const double> values);

// One (setting, defence, attack) over the grid's seeds.
struct Aggregate {
  Setting setting;
  std::size_t defence = 0;
  std::string attack;                           // "none" for the baseline
  std::size_t seeds = 0;                        // cells in the grid
  std::size_t done = 0;                         // of which finished
  std::string reason;                           // of the first cell not done (not applicable / failed / cancelled)
  CellStatus first_status = CellStatus::kDone;  // status of that cell
  std::size_t unfinished = 0;                   // cells failed or cancelled (not applicable ones are not counted)
  Stats accuracy;                               // final accuracy (fraction)
  Stats rounds_to_target;                       // over the finished cells that reached the target
  std::size_t reached = 0;
  Stats changed_fraction;     // over the finished cells compared with the attack-free vote
  Stats changed_coordinates;  // mean fraction of coordinates changed per round
  std::size_t compared = 0;   // finished cells that were compared
  // Protocol attacks: what the defences did, per cell.
  std::size_t with_defences = 0;  // finished cells with a protocol attack
  Stats rejected_messages;
  Stats misbehaviour_events;
  Stats quarantined_byzantine;  // Byzantine nodes quarantined by the end
  Stats equivocation_proofs;
  Stats missing_votes_per_round;
  Stats slowest_round_seconds;
  Stats redundancy;
  std::vector<std::pair<double, double>> curve;  // (round, mean accuracy) at rounds all finished seeds share
};

// In grid order: setting × defence × (baseline, attacks…).
std::vector<Aggregate> aggregate(const GridResult& result);

struct WorstCase {
  double accuracy = 0.0;  // lowest mean accuracy over the attacks that finished
  std::string attack;     // the attack that achieved it
  bool complete = true;   // every attack it is over finished for every seed
  // The grid's attacks it is not over: those that apply to no seed of the defence (sign attacks
  // against a gradient-path rule, ...) and those that finished for no seed (failed, cancelled).
  // A worst case over fewer attacks than another defence's is not comparable with it.
  std::vector<std::string> not_applicable, unfinished;
  bool partial() const noexcept { return !not_applicable.empty() || !unfinished.empty(); }
};
// None when no attack finished for (setting, defence) (or the grid has no attack).
std::optional<WorstCase> worst_case(std::span<const Aggregate> aggregates, Setting setting, std::size_t defence);

struct Figure {
  std::string file;  // relative to the report's directory, e.g. "figures/accuracy_n5_b1.svg"
  std::string caption;
  std::string svg;
};
// Accuracy against rounds: one figure per setting (a panel per defence, a series per attack,
// the baseline dashed); worst case against b: one figure, a panel per n with ≥ 1 attack.
std::vector<Figure> make_figures(const GridResult& result, std::span<const Aggregate> aggregates);

std::string results_json(const GridResult& result);

struct ReportOptions {
  std::string title = "Security evaluation";
  std::string command;   // the command line that made it, shown verbatim; empty: omitted
  std::string preamble;  // Markdown put after the title (e.g. the setup explained); may be empty
};
std::string markdown_report(const GridResult& result, std::span<const Aggregate> aggregates,
                            std::span<const Figure> figures, const ReportOptions& options = {});

// Writes results.json, report.md and the figures (in dir/figures/), creating directories.
// Errors: kIo naming the file.
Status write_report(const GridResult& result, const std::filesystem::path& dir, const ReportOptions& options = {});

// Creates dir/figures/ and checks that a file can be written there: called before a grid runs, so
// that an unwritable report directory is an error at once, not after hours of cells. kIo.
Status prepare_report_dir(const std::filesystem::path& dir);

}  // namespace ballot::evaluation
