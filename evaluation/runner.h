// Runs the cells of an evaluation grid (evaluation/grid.h) with the lockstep engine
// (runtime/experiment.h) on a pool of threads, sharing one loaded dataset.
//
// Per cell: the final test accuracy (whole test set), the accuracy curve from round 0 (the
// initial model, on the same eval_examples) and at every evaluation,
// the rounds to the grid's target accuracy (none when not reached), the fraction of rounds whose
// final vote differed from the attack-free vote (the engine's rounds_changed / rounds) and the
// mean fraction of coordinates it differed in per round, the
// Byzantine node indices, the code's realised redundancy r, the bytes a node sends and receives
// per round and the wall time.
// With Grid::tune_lr set, run_grid first runs the learning-rate sweep (evaluation/tuning.h) on a
// held-out part of the training set, then the grid with each tuned defence's chosen schedule;
// GridResult::grid is that tuned grid and GridResult::tuning the sweeps.
// A cell whose defence does not apply is "not applicable" with its reason; a cell the engine
// refuses or that fails is "failed" with the error; neither stops the grid. Cancellation stops
// the running cells after their current round ("cancelled", partial curve kept) and starts no
// other. Baselines with same_as copy the result of the cell they repeat.
//
// Cells whose attack has a protocol-domain part (crash, omission, delay, equivocation, replay,
// forged signatures, malformed or oversized frames, wrong digests) act on the wire: the engine
// runs them on its sessions (real Ed25519 envelopes, verifiers and quarantine; virtual time with
// Grid::protocol_deadline_ms as the round deadline), and they also report what the defences did
// (DefenceOutcome).
//
// Determinism: every cell is a pure function of its options (the engine is deterministic, its
// time virtual), so results do not depend on `jobs` or on the order cells run in; only seconds
// vary.
// Thread-safety: run_grid may be called concurrently; callbacks are called from pool threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "evaluation/grid.h"
#include "evaluation/progress.h"
#include "evaluation/tuning.h"
#include "learning/dataset.h"
#include "runtime/experiment.h"

namespace ballot::evaluation {

enum class CellStatus : std::uint8_t { kDone, kNotApplicable, kFailed, kCancelled };
const char* cell_status_name(CellStatus status);  // "done", "not applicable", "failed", "cancelled"

struct CurvePoint {
  std::uint64_t round = 0;  // rounds completed when evaluated
  double accuracy = 0.0;
};

// What the transport, the server and the quarantine did in a cell with a protocol attack.
struct DefenceOutcome {
  std::uint64_t rejected_messages = 0;    // dropped by the server's own checks
  std::uint64_t misbehaviour_events = 0;  // counted against nodes (transport and server), in total
  std::size_t quarantined = 0;            // nodes quarantined by the end of the run
  std::size_t quarantined_byzantine = 0;  // of which Byzantine
  std::size_t equivocation_proofs = 0;
  std::uint64_t missing_votes = 0;     // over all rounds: nodes without a counted vote
  double slowest_round_seconds = 0.0;  // virtual: from the round's start to its decision
};

struct CellResult {
  CellStatus status = CellStatus::kCancelled;
  std::string reason;           // not applicable / failed: why
  double final_accuracy = 0.0;  // whole test set, after the last round run
  double final_loss = 0.0;
  std::vector<CurvePoint> curve;                  // round 0 (the initial model) first
  std::optional<std::uint64_t> rounds_to_target;  // first evaluation at ≥ target; none = never
  std::uint64_t rounds = 0;                       // rounds run
  std::uint64_t rounds_changed = 0;               // rounds whose decision differed from attack-free
  double changed_coordinates = 0.0;               // mean per round of the coordinates it differed in
  std::size_t dimension = 0;                      // model parameters d
  // Message bytes per round (runtime/messages.h encodings, without envelope and TLS): what one
  // node sends the server (a packed vote, or its codec's output) and what the server sends each
  // node (the packed decision, or the fp32 direction: the mean over the rounds run, as a sparse
  // direction is smaller). Upload is an upper bound when the codec's size depends on the data
  // (upload_exact false).
  std::size_t upload_bytes = 0;
  std::size_t download_bytes = 0;
  bool upload_exact = true;
  std::vector<std::size_t> byzantine_nodes;
  double redundancy = 0.0;  // r of the allocation matrix (vote path)
  double seconds = 0.0;
  std::optional<DefenceOutcome> defences;  // set iff the cell's attack acts on the wire
  double changed_fraction() const { return rounds ? static_cast<double>(rounds_changed) / rounds : 0.0; }
  // Mean fraction of the d coordinates whose final vote the attack changed per round.
  double changed_coordinate_fraction() const {
    return dimension ? changed_coordinates / static_cast<double>(dimension) : 0.0;
  }
};

struct GridResult {
  Grid grid;                    // as run: with the tuned learning rates when tuning ran
  std::vector<LrSweep> tuning;  // the learning-rate sweeps (empty without Grid::tune_lr)
  std::vector<Cell> cells;
  std::vector<CellResult> results;  // one per cell, same order
  std::size_t jobs = 0;
  double seconds = 0.0;
  bool cancelled = false;
};

struct RunnerOptions {
  std::size_t jobs = 2;             // threads; clamped to [1, cells to run]
  ProgressBar* progress = nullptr;  // null: silent
  std::function<bool()> cancelled;  // polled between rounds; null: never
};

// The metrics of one finished engine run (used by run_grid; exposed for tests).
CellResult summarise(const runtime::ExperimentResult& result, double target_accuracy);

// The engine's cost unit for a cell, rounds × n (a round costs n partition gradients).
double cell_work(const Cell& cell);
// The cells run_grid runs for the grid, the sweep's included, and their work (for a progress bar).
std::pair<std::size_t, double> grid_work(const Grid& grid);
// Whether the cell's attack has a protocol-domain part (its result then has defences).
bool acts_on_the_wire(const Cell& cell);

// Runs the learning-rate sweep when grid.tune_lr is set, then every cell of expand() of the
// (tuned) grid on `data`. Errors: an invalid grid (Grid::validate), a null dataset, a holdout
// the training set cannot spare. Cell failures are results, not errors.
Result<GridResult> run_grid(const Grid& grid, std::shared_ptr<const learning::TrainTestSplit> data,
                            const RunnerOptions& options = {});
// Loads grid.base.data once (runtime::load_training_data), then runs the grid.
Result<GridResult> run_grid(const Grid& grid, const RunnerOptions& options = {});

}  // namespace ballot::evaluation
