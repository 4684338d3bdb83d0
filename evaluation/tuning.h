// The learning-rate sweep of an evaluation grid (Grid::tune_lr): each defence trains its
// attack-free cell — the grid's first seed, at sweep_setting() — with its untuned schedule's base
// rate times each factor of LrTuning, on the training set minus `holdout` examples, and is scored
// on those held-out examples (never on the test set the report shows). The best candidate's
// schedule becomes the defence's lr for every cell of the grid.
//
// Why: the update rules step by amounts of very different scales (a sign rule by η per
// coordinate, sgd by η times the gradient), so a comparison at one learning rate compares
// learning rates, not defences. The sweep gives every defence its best rate at the grid's budget.
//
// Ties go to the factor nearest 1 (the untuned rate), then to the smaller one. A best candidate at
// either end of the factors means the optimum may lie outside them (LrSweep::at_edge), which the
// report says. Deterministic, as every cell is.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "evaluation/grid.h"
#include "learning/dataset.h"

namespace ballot::evaluation {

struct CellResult;  // evaluation/runner.h

struct LrCandidate {
  double factor = 1.0;
  std::string schedule;            // the LrSchedule spec tried
  bool done = false;               // the run finished
  std::string status = "not run";  // its run's cell_status_name: "done", "not applicable", "failed", ...
  std::string reason;              // why it did not finish
  double accuracy = 0.0;           // on the held-out examples, after the sweep's rounds
};

struct LrSweep {
  std::size_t defence = 0;  // index into Grid::defences
  std::string untuned;      // the schedule the defence had before the sweep
  std::string source;       // where that came from: "default" (of the update rule) or "base"
  Setting setting;
  std::uint64_t seed = 0;
  std::uint64_t rounds = 0;
  std::size_t holdout = 0;
  std::vector<LrCandidate> candidates;  // in LrTuning::factors order
  std::optional<std::size_t> chosen;    // index into candidates; none when no candidate finished
  bool at_edge = false;                 // chosen is the smallest or the largest factor
};

// The defences a sweep tunes: those without their own lr, when grid.tune_lr is set.
std::vector<std::size_t> tuned_defences(const Grid& grid);

// The setting the sweep runs at: the grid's first where every tuned defence applies (else its
// first, where a defence that does not apply keeps its untuned rate and the report says so).
// Precondition: the grid is valid (Grid::validate) and grid.tune_lr is set.
Setting sweep_setting(const Grid& grid);

// The sweep as a grid of its own: for each tuned defence and factor a defence named
// "<name> @ lr×<factor>" with that schedule, sweep_setting() and the first seed, the baseline only,
// tune_lr.rounds (or the grid's rounds) rounds with the cosine horizon of the default schedule
// following them. Precondition: grid.tune_lr is set and the grid is valid.
Grid sweep_grid(const Grid& grid);

// The training set split for the sweep: train = all but the last `holdout` training examples
// (0: a sixth of them), test = those. Errors (kInvalidArgument): holdout ≥ the training set's
// size, or a training set too small to spare any.
Result<learning::TrainTestSplit> holdout_split(const learning::TrainTestSplit& data, std::size_t holdout);

// Scale the base rate of an LrSchedule spec: "constant:lr=η > rest" → "constant:lr=η·f > rest".
Result<std::string> scale_lr(const std::string& schedule, double factor);

// The sweeps from the results of sweep_grid(grid)'s cells (`results` in expand() order).
std::vector<LrSweep> choose_learning_rates(const Grid& grid, std::span<const Cell> cells,
                                           std::span<const CellResult> results);

// `grid` with each swept defence's lr set to its chosen schedule (defences with no finished
// candidate keep their untuned one), and tune_lr cleared.
Grid with_tuned_lr(Grid grid, std::span<const LrSweep> sweeps);

}  // namespace ballot::evaluation
