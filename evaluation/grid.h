// An evaluation grid: attacks × defences × settings (n, b) × seeds, over one
// set of base training options. Expanded into cells, each a complete runtime::TrainingOptions
// that runtime/experiment.h runs.
//
//   attack    an attack spec string as `ballot train --attack` takes it ("reverse", "ipm:eps=0.5")
//   defence   a named bundle of the aggregation fields of TrainingOptions: code, rule, codec and,
//             when set, update, worker_momentum and lr. Built-in names (named_defence):
//               "signSGD-MV" (alias "identity")  code identity, rule vote
//               "bernoulli r=R" / "bernoulli:r=R" code bernoulli:r=R, rule vote
//               "deterministic"                 code deterministic (b from the setting)
//               any other allocation matrix spec (e.g. "paper5") as a code, rule vote
//               "RULE/CODEC" ("median/fp32", "trimmed_mean:f=1/qsgd:s=16")  the gradient path:
//                 rule RULE, codec CODEC, update "sgd:momentum=0.9" ("sgd" for a dgc codec, whose
//                 momentum is at the node), worker momentum 0
//   setting   (n, b): n nodes, b of them Byzantine. The cell's fault budget and its number of
//             attackers are both b; the deterministic code is built for b.
//   seed      the run's seed (Byzantine set, Bernoulli code, partitions, model initialisation)
//
// Learning rates: the update rules move the parameters by steps of very different sizes (a sign
// rule by η per coordinate, sgd by η times the gradient), so a cell's schedule is, in order: the
// defence's own `lr`; base.lr when Grid::lr_per_update is false (the user gave one for all);
// otherwise the default schedule of the cell's update rule over base.rounds
// (default_lr_schedule, learning/optimizer.h). With Grid::tune_lr, run_grid first sweeps multiples
// of that rate on the attack-free cell (evaluation/tuning.h) and uses the best.
//
// The attack-free baseline of a (defence, setting, seed) is the cell with attack "none" and no
// attacker; baselines that would train identically (baseline_key()) run once: the later ones
// point at the first (Cell::same_as), so a baseline typically runs once per defence, n and seed.
//
// JSON grid file (every key optional except what the grid needs: ≥ 1 attack or baseline, ≥ 1
// defence, ≥ 1 setting, ≥ 1 seed; unknown keys are errors):
// {
//   "base": {"data": "fashion-mnist", "model": "mlp:hidden=128", "rounds": 300, "lr": "...",
//            "update": "sign:wd=0", "worker_momentum": 0.9, "partition_size": 32,   // "lr" here:
//                                                            // lr_per_update = false
//            "eval_every": 50, "eval_examples": 10000},          // runtime/cluster_config.h keys
//   "attacks": ["reverse", "random"],
//   "defences": ["signSGD-MV", "bernoulli r=2",
//                {"name": "median", "rule": "median", "codec": "fp32", "update": "sgd",
//                 "lr": "constant:lr=0.1"}],
//   "settings": [{"n": 5, "b": 1}, {"n": 9, "b": 2}],  // or "nodes": [5, 9] × "byzantine": [1, 2]
//   "seeds": [1, 2],
//   "attacker_choice": "random",        // "random" | "worst" | "0,3" (runtime TrainingOptions)
//   "target_accuracy": 0.8,
//   "baseline": true,                   // run the attack-free cells
//   "protocol_deadline_ms": 300,        // round deadline (virtual time) of the cells
//   "tune_lr": true                     // or {"factors": [0.1, 0.3, 1, 3, 10], "rounds": 200,
//                                       //     "holdout": 10000}: see LrTuning
// }
// Errors (kInvalidArgument) name the grid entry ("grid: defences[2]: …").
// Thread-safety: values; free functions are reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "runtime/training.h"

namespace ballot::evaluation {

struct Defence {
  std::string name;                       // shown in reports; unique within a grid
  std::string code = "identity";          // coding/allocation_matrix.h spec
  std::string rule = "vote";              // "vote" or a robust/registry.h rule or pipeline
  std::string codec = "fp32";             // gradient path only
  std::optional<std::string> update;      // unset: the base options' update
  std::optional<double> worker_momentum;  // unset: the base options' worker momentum
  std::optional<std::string> lr;          // LrSchedule spec; unset: see Grid::lr_per_update
};

// The built-in defences above; errors name the text.
Result<Defence> named_defence(std::string_view name);

struct Setting {
  std::size_t nodes = 0;      // n
  std::size_t byzantine = 0;  // b
  friend bool operator==(const Setting&, const Setting&) = default;
  friend auto operator<=>(const Setting&, const Setting&) = default;
};

inline constexpr std::uint32_t kMaxProtocolDeadlineMs = 600000;

// The learning-rate sweep run_grid does before the grid (evaluation/tuning.h): for every defence
// without its own lr, the attack-free cell of the first seed at the first setting where every
// tuned defence applies (tuning.h, sweep_setting), trained with its
// untuned schedule's base rate times each factor and scored on `holdout` examples held out of
// the training set (the test set is not used to choose). The best factor's schedule becomes the
// defence's lr for the whole grid.
struct LrTuning {
  std::vector<double> factors = {0.1, 0.3, 1.0, 3.0, 10.0};
  std::uint64_t rounds = 0;  // 0: the grid's rounds (the accuracy compared is at those rounds)
  // Training examples held out to score the candidates; 0: a sixth of the training set (10000
  // of Fashion-MNIST's 60000, as many as its test set).
  std::size_t holdout = 0;
  friend bool operator==(const LrTuning&, const LrTuning&) = default;
};

struct Grid {
  runtime::TrainingOptions base;     // everything the grid does not vary
  std::vector<std::string> attacks;  // without "none": the baseline is `baseline`
  std::vector<Defence> defences;
  std::vector<Setting> settings;
  std::vector<std::uint64_t> seeds = {1};
  std::string attacker_choice = "random";
  double target_accuracy = 0.8;  // for "rounds to target"
  bool baseline = true;
  // The server's round deadline in every cell (virtual time, runtime/experiment.h): after it the
  // server decides with n − b votes. It matters where a protocol attack withholds or delays a
  // vote (a delay without its own length sends at twice it); it costs no wall time.
  std::uint32_t protocol_deadline_ms = 300;
  // True: a defence without its own lr gets the default schedule of its update rule
  // (default_lr_schedule over base.rounds) and base.lr is not used; false: base.lr for every
  // such defence (set when the user gives a learning rate for the whole grid).
  bool lr_per_update = true;
  std::optional<LrTuning> tune_lr;  // set: sweep the learning rates first

  // Checks every entry (attack and defence specs parse, names unique, settings have b < n/2 —
  // a setting the runtime cannot run at all — target in (0, 1], no duplicates, base options
  // valid). Errors name the entry. A defence that does not apply to a setting is not an error
  // (see Cell::not_applicable).
  Status validate() const;
};

// Parses a grid file (format above) on top of `defaults` (whose base, seeds, … the file's keys
// replace). Errors name the key or entry.
Result<Grid> parse_grid(std::string_view json_text, Grid defaults = {});
Result<Grid> load_grid(const std::string& path, Grid defaults = {});

// Splits a command-line list at commas that separate entries, not options of one spec:
// "ipm:eps=0.5,x=1,reverse" → {"ipm:eps=0.5,x=1", "reverse"} (a piece that starts with "key="
// continues the previous entry). Whitespace around entries is trimmed; empty entries dropped.
std::vector<std::string> split_list(std::string_view text);

// The election-coding paper's setups (Sohn et al. 2020, ALGORITHMS.md §3): (n, b) ∈ {(5,1),
// (9,2), (15,3), (5,2), (9,3), (15,6)}, the reverse attack, Fashion-MNIST, signSGD-MV against
// Bernoulli r = 2, r = 3 and the deterministic code, plus the attack-free baseline; seeds 1, 2, 3.
// The learning rate is the sign rule's default schedule over `rounds`. See docs/evaluation.md for the
// training setup used and why.
inline constexpr std::uint64_t kPaperPresetRounds = 500;
Grid paper_preset(std::uint64_t rounds = kPaperPresetRounds);

struct Cell {
  std::size_t index = 0;  // position in expand()'s output
  Setting setting;
  std::size_t defence = 0;  // index into Grid::defences
  std::string attack;       // "none" for the baseline
  std::uint64_t seed = 0;
  runtime::TrainingOptions options;
  // Set when the defence does not apply to the setting (e.g. the deterministic code needs odd n;
  // a robust rule's precondition on n − b fails): the runtime's reason. The grid goes on.
  std::optional<std::string> not_applicable;
  // A baseline identical to an earlier cell: that cell's result is this one's.
  std::optional<std::size_t> same_as;

  bool baseline() const { return attack == "none"; }
};

// The cells of a validated grid, in order setting × defence × (baseline, attacks…) × seed; a
// baseline equal to an earlier one gets same_as. Applicability is decided with TrainingOptions::validate() and the
// allocation-matrix factory, without loading data.
std::vector<Cell> expand(const Grid& grid);

// The learning-rate schedule a defence's cells use (see "Learning rates" above), before tuning.
// Errors: an update rule default_lr_schedule does not know.
Result<std::string> defence_lr(const Grid& grid, const Defence& defence);
// Where that schedule comes from, for the report: "defence", "base" or "default".
std::string defence_lr_source(const Grid& grid, const Defence& defence);
// The update rule the defence's cells apply (its own or base.update).
std::string defence_update(const Grid& grid, const Defence& defence);

// Cells with equal keys train identically: the options with the fault budget cleared when
// nothing in the attack-free run depends on it.
std::string baseline_key(const runtime::TrainingOptions& options);

}  // namespace ballot::evaluation
