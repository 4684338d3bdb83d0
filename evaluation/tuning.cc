#include "evaluation/tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "evaluation/runner.h"
#include "learning/optimizer.h"

namespace ballot::evaluation {
namespace {

std::string factor_text(double factor) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", factor);
  return text;
}

std::string candidate_name(const Defence& defence, double factor) {
  return defence.name + " @ lr×" + factor_text(factor);
}

std::uint64_t sweep_rounds(const Grid& grid) {
  return grid.tune_lr && grid.tune_lr->rounds > 0 ? grid.tune_lr->rounds : grid.base.rounds;
}

// The grid's learning-rate choice at the sweep's number of rounds (the default schedule's cosine
// horizon follows the rounds; a base or defence schedule is the user's and stays as given).
Grid at_sweep_rounds(const Grid& grid) {
  Grid out = grid;
  out.base.rounds = sweep_rounds(grid);
  return out;
}

}  // namespace

std::vector<std::size_t> tuned_defences(const Grid& grid) {
  std::vector<std::size_t> out;
  if (!grid.tune_lr) return out;
  for (std::size_t d = 0; d < grid.defences.size(); ++d) {
    if (!grid.defences[d].lr) out.push_back(d);
  }
  return out;
}

Result<std::string> scale_lr(const std::string& schedule, double factor) {
  BALLOT_ASSIGN_OR_RETURN(const auto parsed, learning::LrSchedule::parse(schedule));
  const double lr = parsed.base() * factor;
  if (!(lr > 0.0) || !std::isfinite(lr)) {
    return make_error(ErrorCode::kInvalidArgument, "scale_lr: factor " + factor_text(factor) + " gives no valid rate");
  }
  // Keep the user's text after the first stage; only the base rate changes.
  const auto rest = schedule.find('>');
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", lr);
  std::string out = "constant:lr=" + std::string(text);
  if (rest != std::string::npos) {
    std::size_t start = rest + 1;
    while (start < schedule.size() && schedule[start] == ' ') ++start;
    out += " > " + schedule.substr(start);
  }
  return out;
}

namespace {

// The sweep's candidates for the grid, without its setting.
Grid sweep_candidates(const Grid& grid) {
  const Grid at_rounds = at_sweep_rounds(grid);
  Grid sweep = at_rounds;
  sweep.tune_lr.reset();
  sweep.attacks.clear();
  sweep.baseline = true;
  sweep.seeds = {grid.seeds.front()};
  sweep.defences.clear();
  for (auto d : tuned_defences(grid)) {
    const Defence& defence = grid.defences[d];
    // Grid::validate() checked that the defence has a schedule.
    const std::string untuned = defence_lr(at_rounds, defence).value_or(grid.base.lr);
    for (double factor : grid.tune_lr->factors) {
      Defence candidate = defence;
      candidate.name = candidate_name(defence, factor);
      candidate.lr = scale_lr(untuned, factor).value_or(untuned);
      sweep.defences.push_back(std::move(candidate));
    }
  }
  return sweep;
}

}  // namespace

Setting sweep_setting(const Grid& grid) {
  // The first setting where every tuned defence applies (the deterministic code needs an odd n,
  // Krum n ≥ 2b + 3, ...): a defence swept where it does not apply would keep its untuned rate
  // while the others got tuned ones. expand() is pure and cheap (no training).
  Grid sweep = sweep_candidates(grid);
  for (const Setting& setting : grid.settings) {
    sweep.settings = {setting};
    const auto cells = expand(sweep);
    if (std::none_of(cells.begin(), cells.end(), [](const Cell& c) { return c.not_applicable.has_value(); }))
      return setting;
  }
  return grid.settings.front();
}

Grid sweep_grid(const Grid& grid) {
  Grid sweep = sweep_candidates(grid);
  sweep.settings = {sweep_setting(grid)};
  return sweep;
}

Result<learning::TrainTestSplit> holdout_split(const learning::TrainTestSplit& data, std::size_t holdout) {
  const learning::Dataset& train = data.train;
  if (holdout == 0) holdout = train.size() / 6;
  if (holdout == 0 || holdout >= train.size()) {
    return make_error(ErrorCode::kInvalidArgument, "tune_lr: holdout " + std::to_string(holdout) +
                                                       " must be positive and below the training set's " +
                                                       std::to_string(train.size()) + " examples");
  }
  const std::size_t keep = train.size() - holdout;
  const std::size_t f = train.num_features;
  learning::TrainTestSplit out;
  for (learning::Dataset* part : {&out.train, &out.test}) {
    part->num_features = f;
    part->num_classes = train.num_classes;
    part->rows = train.rows;
    part->cols = train.cols;
    part->channels = train.channels;
  }
  const auto split = static_cast<std::ptrdiff_t>(keep);
  out.train.features.assign(train.features.begin(), train.features.begin() + split * static_cast<std::ptrdiff_t>(f));
  out.train.labels.assign(train.labels.begin(), train.labels.begin() + split);
  out.test.features.assign(train.features.begin() + split * static_cast<std::ptrdiff_t>(f), train.features.end());
  out.test.labels.assign(train.labels.begin() + split, train.labels.end());
  return out;
}

std::vector<LrSweep> choose_learning_rates(const Grid& grid, std::span<const Cell> cells,
                                           std::span<const CellResult> results) {
  std::vector<LrSweep> sweeps;
  if (!grid.tune_lr) return sweeps;
  const Grid at_rounds = at_sweep_rounds(grid);
  const auto& factors = grid.tune_lr->factors;
  const auto tuned = tuned_defences(grid);
  const Setting setting = sweep_setting(grid);
  for (std::size_t t = 0; t < tuned.size(); ++t) {
    const std::size_t d = tuned[t];
    const Defence& defence = grid.defences[d];
    LrSweep sweep;
    sweep.defence = d;
    sweep.untuned = defence_lr(grid, defence).value_or(grid.base.lr);
    sweep.source = defence_lr_source(grid, defence);
    sweep.setting = setting;
    sweep.seed = grid.seeds.front();
    sweep.rounds = sweep_rounds(grid);
    sweep.holdout = grid.tune_lr->holdout;  // 0 until run_grid knows the training set
    const std::string untuned_here = defence_lr(at_rounds, defence).value_or(grid.base.lr);
    for (std::size_t i = 0; i < factors.size(); ++i) {
      LrCandidate candidate;
      candidate.factor = factors[i];
      candidate.schedule = scale_lr(untuned_here, factors[i]).value_or(untuned_here);
      for (std::size_t k = 0; k < cells.size() && k < results.size(); ++k) {
        // sweep_grid's defences: tuned defence t's candidates at t·F + i.
        if (cells[k].defence != t * factors.size() + i) continue;
        const CellResult& r = results[k];
        candidate.done = r.status == CellStatus::kDone;
        candidate.status = cell_status_name(r.status);
        candidate.reason = r.reason;
        candidate.accuracy = r.final_accuracy;
        if (candidate.done) break;
      }
      sweep.candidates.push_back(std::move(candidate));
    }
    // Best held-out accuracy; ties to the factor nearest 1, then the smaller.
    for (std::size_t k = 0; k < sweep.candidates.size(); ++k) {
      const auto& c = sweep.candidates[k];
      if (!c.done) continue;
      if (!sweep.chosen) {
        sweep.chosen = k;
        continue;
      }
      const auto& best = sweep.candidates[*sweep.chosen];
      const double distance = std::abs(std::log(c.factor)), best_distance = std::abs(std::log(best.factor));
      if (c.accuracy > best.accuracy ||
          (c.accuracy == best.accuracy &&
           (distance < best_distance || (distance == best_distance && c.factor < best.factor)))) {
        sweep.chosen = k;
      }
    }
    if (sweep.chosen) {
      const double chosen = sweep.candidates[*sweep.chosen].factor;
      const auto [lo, hi] = std::minmax_element(factors.begin(), factors.end());
      sweep.at_edge = factors.size() > 1 && (chosen == *lo || chosen == *hi);
    }
    sweeps.push_back(std::move(sweep));
  }
  return sweeps;
}

Grid with_tuned_lr(Grid grid, std::span<const LrSweep> sweeps) {
  for (const auto& sweep : sweeps) {
    if (!sweep.chosen || sweep.defence >= grid.defences.size()) continue;
    Defence& defence = grid.defences[sweep.defence];
    // The chosen factor applied to the grid's own schedule (its cosine horizon is the grid's
    // rounds, which the sweep's may not be).
    defence.lr = scale_lr(sweep.untuned, sweep.candidates[*sweep.chosen].factor).value_or(sweep.untuned);
  }
  grid.tune_lr.reset();
  return grid;
}

}  // namespace ballot::evaluation
