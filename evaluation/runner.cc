#include "evaluation/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <numeric>
#include <thread>

#include "attacks/attack_spec.h"
#include "coding/codec_registry.h"
#include "runtime/messages.h"
#include "runtime/quarantine.h"
#include "runtime/replica.h"

namespace ballot::evaluation {
namespace {

std::string describe(const Grid& grid, const Cell& cell) {
  char text[64];
  std::snprintf(text, sizeof(text), "n=%zu b=%zu ", cell.setting.nodes, cell.setting.byzantine);
  return text + grid.defences[cell.defence].name + " / " + (cell.baseline() ? "no attack" : cell.attack) + " / seed " +
         std::to_string(cell.seed);
}

std::string outcome(const CellResult& result) {
  char text[128];
  switch (result.status) {
    case CellStatus::kDone:
      if (const auto& d = result.defences) {
        std::snprintf(text, sizeof(text), "acc %.2f%%, %llu rejected, %zu quarantined, %zu proofs, %.1f s",
                      100.0 * result.final_accuracy, static_cast<unsigned long long>(d->rejected_messages),
                      d->quarantined, d->equivocation_proofs, result.seconds);
        return text;
      }
      std::snprintf(text, sizeof(text), "acc %.2f%%, vote changed in %.1f%% of rounds (%.3f%% of coordinates), %.1f s",
                    100.0 * result.final_accuracy, 100.0 * result.changed_fraction(),
                    100.0 * result.changed_coordinate_fraction(), result.seconds);
      return text;
    case CellStatus::kNotApplicable:
      return "not applicable: " + result.reason;
    case CellStatus::kFailed:
      return "failed: " + result.reason;
    case CellStatus::kCancelled:
      return "cancelled";
  }
  return "";
}

// `reported` accumulates the work handed to the progress bar, so that the runner adds only the
// rest when the cell ends (early, failed or done).
CellResult run_in_engine(const Grid& grid, const Cell& cell, const runtime::TrainingSetup& setup,
                         const RunnerOptions& options, double& reported) {
  runtime::ExperimentOptions engine;
  engine.round_deadline = std::chrono::milliseconds(grid.protocol_deadline_ms);
  const double per_round = static_cast<double>(setup.options.nodes);
  if (options.progress) {
    engine.on_round = [&](const runtime::ExperimentRound&) {
      options.progress->add_work(per_round);
      reported += per_round;
    };
  }
  engine.cancelled = options.cancelled;
  auto result = runtime::run_experiment(setup, engine);
  if (!result.ok()) {
    CellResult out;
    out.status = CellStatus::kFailed;
    out.reason = result.error().to_string();
    return out;
  }
  CellResult out = summarise(*result, grid.target_accuracy);
  if (acts_on_the_wire(cell)) {
    DefenceOutcome defences;
    const auto& report = result->defences;
    defences.rejected_messages = report.rejected_messages;
    for (const auto& [node, events] : report.misbehaviour) defences.misbehaviour_events += events;
    defences.quarantined = report.quarantined.size();
    for (auto node : report.quarantined) defences.quarantined_byzantine += setup.is_byzantine(node) ? 1 : 0;
    defences.equivocation_proofs = report.equivocation_proofs;
    for (const auto& round : result->rounds) {
      defences.missing_votes += setup.options.nodes - round.votes;
      defences.slowest_round_seconds = std::max(defences.slowest_round_seconds, round.seconds);
    }
    out.defences = defences;
  }
  return out;
}

struct MessageBytes {
  std::size_t upload = 0, download = 0;
  bool upload_exact = true;
};

// The encoded messages of one round, measured by encoding them: the report's bytes per round.
MessageBytes message_bytes(const runtime::TrainingSetup& setup, const GradientLayout& layout) {
  MessageBytes out;
  const std::size_t d = layout.total_size();
  if (setup.sign_vote()) {
    runtime::Vote vote;
    vote.signs.resize(d);
    runtime::Decision decision;
    decision.signs.resize(d);
    out.upload = runtime::encode(vote).size();
    out.download = runtime::encode(decision).size();
    return out;
  }
  if (auto codec = coding::make_codec(setup.options.codec); codec.ok()) {
    runtime::EncodedVote vote;
    vote.bytes.resize((*codec)->wire_size(layout));
    out.upload = runtime::encode(vote).size();
    out.upload_exact = (*codec)->exact_wire_size();
  }
  out.download = runtime::decision_bytes(d, false);  // the dense form, the largest
  return out;
}

CellResult run_cell(const Grid& grid, const Cell& cell, const std::shared_ptr<const learning::TrainTestSplit>& data,
                    const RunnerOptions& options, double& reported) {
  CellResult out;
  if (cell.not_applicable) {
    out.status = CellStatus::kNotApplicable;
    out.reason = *cell.not_applicable;
    return out;
  }
  const auto start = std::chrono::steady_clock::now();
  auto setup = runtime::make_training_setup(cell.options, data);
  if (!setup.ok()) {
    // expand() checked the options without data; what is left is the data's fault or the code's.
    out.status = CellStatus::kNotApplicable;
    out.reason = setup.error().message;
    return out;
  }
  // The initial model (every engine builds the same one from the seed): the
  // curve starts at round 0, where every defence starts from the same accuracy.
  std::optional<CurvePoint> start_point;
  std::size_t dimension = 0;
  MessageBytes bytes;
  if (auto replica = runtime::Replica::create(*setup); replica.ok()) {
    dimension = replica->dimension();
    start_point = CurvePoint{0, replica->evaluate(setup->data->test, cell.options.eval_examples).accuracy};
    bytes = message_bytes(*setup, replica->model().layout());
  }
  out = run_in_engine(grid, cell, *setup, options, reported);
  if (out.status == CellStatus::kDone && out.rounds < cell.options.rounds) out.status = CellStatus::kCancelled;
  if (start_point && (out.status == CellStatus::kDone || out.status == CellStatus::kCancelled)) {
    out.curve.insert(out.curve.begin(), *start_point);
  }
  out.byzantine_nodes = setup->byzantine;
  out.dimension = dimension;
  out.upload_bytes = bytes.upload;
  if (out.download_bytes == 0) out.download_bytes = bytes.download;  // no round measured
  out.upload_exact = bytes.upload_exact;
  out.redundancy = setup->sign_vote() ? setup->code.redundancy() : 1.0;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace

const char* cell_status_name(CellStatus status) {
  switch (status) {
    case CellStatus::kDone:
      return "done";
    case CellStatus::kNotApplicable:
      return "not applicable";
    case CellStatus::kFailed:
      return "failed";
    case CellStatus::kCancelled:
      return "cancelled";
  }
  return "?";
}

CellResult summarise(const runtime::ExperimentResult& result, double target_accuracy) {
  CellResult out;
  out.status = CellStatus::kDone;
  out.final_accuracy = result.test.accuracy;
  out.final_loss = result.test.loss;
  out.rounds = result.rounds.size();
  out.rounds_changed = result.rounds_changed;
  out.seconds = result.seconds;
  std::uint64_t decision_bytes = 0;
  for (const auto& round : result.rounds) {
    out.changed_coordinates += static_cast<double>(round.changed_coordinates);
    decision_bytes += round.decision_bytes;
  }
  if (!result.rounds.empty()) {
    out.changed_coordinates /= static_cast<double>(result.rounds.size());
    // The mean of the decisions sent: a sparse FloatDecision's size depends on the round.
    out.download_bytes = static_cast<std::size_t>((decision_bytes + result.rounds.size() - 1) / result.rounds.size());
  }
  for (const auto& round : result.rounds) {
    if (!round.evaluated) continue;
    out.curve.push_back({round.round + 1, round.test.accuracy});
    if (!out.rounds_to_target && round.test.accuracy >= target_accuracy) out.rounds_to_target = round.round + 1;
  }
  return out;
}

bool acts_on_the_wire(const Cell& cell) {
  if (cell.baseline()) return false;
  auto attack = attacks::AttackSpec::parse(cell.attack);
  return attack.ok() && attack->find(attacks::Domain::kProtocol) != nullptr;
}

double cell_work(const Cell& cell) {
  if (cell.not_applicable || cell.same_as) return 0.0;
  return static_cast<double>(cell.options.rounds) * static_cast<double>(cell.options.nodes);
}

namespace {

// The cells of one grid (no tuning); the caller finishes the progress bar.
GridResult run_cells(const Grid& grid, const std::shared_ptr<const learning::TrainTestSplit>& data,
                     const RunnerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GridResult out;
  out.grid = grid;
  out.cells = expand(grid);
  out.results.resize(out.cells.size());

  // Longest cells first: with a pool, that keeps the last minutes busy on every thread.
  std::vector<std::size_t> order;
  for (const auto& cell : out.cells) {
    if (!cell.same_as) order.push_back(cell.index);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cell_work(out.cells[a]) > cell_work(out.cells[b]); });
  out.jobs = std::clamp<std::size_t>(options.jobs, 1, std::max<std::size_t>(1, order.size()));

  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  const auto cancelled = [&] {
    if (stop.load()) return true;
    if (options.cancelled && options.cancelled()) stop.store(true);
    return stop.load();
  };
  RunnerOptions cell_options = options;
  cell_options.cancelled = cancelled;
  const auto worker = [&] {
    for (std::size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) {
      const Cell& cell = out.cells[order[k]];
      CellResult& result = out.results[cell.index];
      double reported = 0.0;  // work this cell has shown on the progress bar
      if (!cell.not_applicable && cancelled()) {
        result.status = CellStatus::kCancelled;
      } else {
        // A thread must not die on an exception (it would terminate the process and lose the
        // grid): whatever escapes the engine is this cell's failure.
        try {
          result = run_cell(grid, cell, data, cell_options, reported);
        } catch (const std::exception& e) {
          result = {};
          result.status = CellStatus::kFailed;
          result.reason = std::string("exception: ") + e.what();
        }
      }
      if (options.progress) {
        // What on_round did not count (a cell that stopped early, failed or never started).
        const double left = cell_work(cell) - reported;
        options.progress->cell_done(describe(grid, cell) + ": " + outcome(result), left);
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < out.jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& thread : threads) thread.join();

  for (const auto& cell : out.cells) {
    if (cell.same_as) out.results[cell.index] = out.results[*cell.same_as];
  }
  out.cancelled = stop.load();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace

std::pair<std::size_t, double> grid_work(const Grid& grid) {
  std::size_t cells = 0;
  double work = 0.0;
  const auto count = [&](const Grid& g) {
    for (const auto& cell : expand(g)) {
      if (cell.same_as) continue;
      ++cells;
      work += cell_work(cell);
    }
  };
  if (grid.tune_lr) count(sweep_grid(grid));
  count(grid);
  return {cells, work};
}

Result<GridResult> run_grid(const Grid& grid, std::shared_ptr<const learning::TrainTestSplit> data,
                            const RunnerOptions& options) {
  BALLOT_TRY(grid.validate());
  if (data == nullptr) return make_error(ErrorCode::kInvalidArgument, "run_grid: no dataset");
  const auto start = std::chrono::steady_clock::now();
  Grid tuned = grid;
  std::vector<LrSweep> sweeps;
  bool cancelled = false;
  if (grid.tune_lr && !tuned_defences(grid).empty()) {
    BALLOT_ASSIGN_OR_RETURN(auto split, holdout_split(*data, grid.tune_lr->holdout));
    const auto holdout = std::make_shared<const learning::TrainTestSplit>(std::move(split));
    const GridResult sweep = run_cells(sweep_grid(grid), holdout, options);
    sweeps = choose_learning_rates(grid, sweep.cells, sweep.results);
    for (auto& s : sweeps) s.holdout = holdout->test.size();
    cancelled = sweep.cancelled;
  }
  tuned = with_tuned_lr(std::move(tuned), sweeps);
  RunnerOptions rest = options;
  if (cancelled) rest.cancelled = [] { return true; };
  GridResult out = run_cells(tuned, data, rest);
  out.tuning = std::move(sweeps);
  out.cancelled = out.cancelled || cancelled;
  if (options.progress) options.progress->finish();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Result<GridResult> run_grid(const Grid& grid, const RunnerOptions& options) {
  BALLOT_TRY(grid.validate());
  BALLOT_ASSIGN_OR_RETURN(auto data, runtime::load_training_data(grid.base));
  return run_grid(grid, std::make_shared<const learning::TrainTestSplit>(std::move(data)), options);
}

}  // namespace ballot::evaluation
