// Runs the cells of an evaluation grid (evaluation/grid.h) with the lockstep engine
// (runtime/experiment.h) on a pool of threads, sharing one loaded dataset.
//
// Per cell: the final test accuracy (whole test set), the accuracy curve at every evaluation,
// the rounds to the grid's target accuracy (none when not reached), the fraction of rounds whose
// final vote differed from the attack-free vote (the engine's rounds_changed / rounds) and the
// mean fraction of coordinates it differed in per round, the
// Byzantine node indices, the code's realised redundancy r and the wall time.
// A cell whose defence does not apply is "not applicable" with its reason; a cell the engine
// refuses or that fails is "failed" with the error; neither stops the grid. Cancellation stops
// the running cells after their current round ("cancelled", partial curve kept) and starts no
// other. Baselines with same_as copy the result of the cell they repeat.
//
// Determinism: every cell is a pure function of its options (the engine is deterministic), so
// results do not depend on `jobs` or on the order cells run in; only seconds vary.
// Thread-safety: run_grid may be called concurrently; callbacks are called from pool threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dataset.h"
#include "core/result.h"
#include "evaluation/grid.h"
#include "evaluation/progress.h"
#include "runtime/experiment.h"

namespace ballot::evaluation {

enum class CellStatus : std::uint8_t { kDone, kNotApplicable, kFailed, kCancelled };
const char* cell_status_name(CellStatus status);  // "done", "not applicable", "failed", "cancelled"

struct CurvePoint {
  std::uint64_t round = 0;  // rounds completed when evaluated
  double accuracy = 0.0;
};

struct CellResult {
  CellStatus status = CellStatus::kCancelled;
  std::string reason;                             // not applicable / failed: why
  double final_accuracy = 0.0;                    // whole test set, after the last round run
  double final_loss = 0.0;
  std::vector<CurvePoint> curve;
  std::optional<std::uint64_t> rounds_to_target;  // first evaluation at ≥ target; none = never
  std::uint64_t rounds = 0;                       // rounds run
  std::uint64_t rounds_changed = 0;               // rounds whose decision differed from attack-free
  double changed_coordinates = 0.0;               // mean per round of the coordinates it differed in
  std::size_t dimension = 0;                      // model parameters d
  std::vector<std::size_t> byzantine_nodes;
  double redundancy = 0.0;                        // r of the allocation matrix (vote path)
  double seconds = 0.0;

  double changed_fraction() const { return rounds ? static_cast<double>(rounds_changed) / rounds : 0.0; }
  // Mean fraction of the d coordinates whose final vote the attack changed per round.
  double changed_coordinate_fraction() const { return dimension ? changed_coordinates / static_cast<double>(dimension) : 0.0; }
};

struct GridResult {
  Grid grid;
  std::vector<Cell> cells;
  std::vector<CellResult> results;  // one per cell, same order
  std::size_t jobs = 0;
  double seconds = 0.0;
  bool cancelled = false;
};

struct RunnerOptions {
  std::size_t jobs = 2;                // threads; clamped to [1, cells to run]
  ProgressBar* progress = nullptr;     // null: silent
  std::function<bool()> cancelled;     // polled between rounds; null: never
};

// The metrics of one finished engine run (used by run_grid; exposed for tests).
CellResult summarise(const runtime::ExperimentResult& result, double target_accuracy);

// The engine's cost unit for a cell, rounds × n (a round costs n partition gradients).
double cell_work(const Cell& cell);

// Runs every cell of expand(grid) on `data`. Errors: an invalid grid (Grid::validate), a null
// dataset. Cell failures are results, not errors.
Result<GridResult> run_grid(const Grid& grid, std::shared_ptr<const TrainTestSplit> data,
                            const RunnerOptions& options = {});
// Loads grid.base.data once (runtime::load_training_data), then runs the grid.
Result<GridResult> run_grid(const Grid& grid, const RunnerOptions& options = {});

}  // namespace ballot::evaluation
