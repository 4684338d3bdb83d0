#include "evaluation/runner.h"

#include <gtest/gtest.h>

#include <atomic>

namespace ballot::evaluation {
namespace {

TEST(Summarise, CurveTargetAndChangedRounds) {
  runtime::ExperimentResult r;
  for (std::uint64_t round = 0; round < 10; ++round) {
    runtime::ExperimentRound x;
    x.round = round;
    x.evaluated = round % 3 == 2 || round == 9;
    x.test.accuracy = 0.1 * static_cast<double>(round);
    x.changed_coordinates = round < 4 ? 5 : 0;
    x.decision_bytes = round < 5 ? 100 : 41;  // sparse decisions vary by round
    r.rounds.push_back(x);
  }
  r.rounds_changed = 4;
  r.test.accuracy = 0.93;
  r.test.loss = 0.25;
  const auto c = summarise(r, 0.5);
  EXPECT_EQ(c.status, CellStatus::kDone);
  EXPECT_EQ(c.rounds, 10u);
  EXPECT_DOUBLE_EQ(c.changed_fraction(), 0.4);
  EXPECT_DOUBLE_EQ(c.final_accuracy, 0.93);
  EXPECT_DOUBLE_EQ(c.changed_coordinates, 2.0);  // 4 rounds × 5 over 10 rounds
  EXPECT_EQ(c.download_bytes, 71u);              // (5 × 100 + 5 × 41) / 10, rounded up
  ASSERT_EQ(c.curve.size(), 4u);                 // after rounds 3, 6, 9 and the last (10)
  EXPECT_EQ(c.curve[0].round, 3u);
  EXPECT_EQ(c.curve[3].round, 10u);
  // Round indices 2, 5, 8, 9 are evaluated: 0.5 is reached at index 5, i.e. after 6 rounds; 0.7
  // first appears at index 7 but is only seen at the evaluation of index 8.
  ASSERT_TRUE(c.rounds_to_target.has_value());
  EXPECT_EQ(*c.rounds_to_target, 6u);
  EXPECT_EQ(summarise(r, 0.7).rounds_to_target.value_or(0), 9u);
  EXPECT_FALSE(summarise(r, 0.95).rounds_to_target.has_value());
}

Grid small_grid() {
  auto grid = parse_grid(R"({
    "base": {"data": "synthetic:examples=256,features=8,classes=4,separation=3", "model": "logreg",
             "rounds": 10, "lr": "constant:lr=0.05", "eval_every": 5, "partition_size": 16},
    "attacks": ["reverse"],
    "defences": ["signSGD-MV", "deterministic"],
    "settings": [{"n": 5, "b": 1}, {"n": 5, "b": 2}, {"n": 6, "b": 1}],
    "seeds": [1],
    "target_accuracy": 0.3
  })");
  EXPECT_TRUE(grid.ok()) << grid.error().message;
  return *grid;
}

TEST(RunGrid, ResultsDoNotDependOnJobs) {
  const Grid grid = small_grid();
  auto one = run_grid(grid, RunnerOptions{.jobs = 1});
  auto two = run_grid(grid, RunnerOptions{.jobs = 2});
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(one->jobs, 1u);
  EXPECT_EQ(two->jobs, 2u);
  ASSERT_EQ(one->results.size(), two->results.size());
  for (std::size_t i = 0; i < one->results.size(); ++i) {
    const auto& a = one->results[i];
    const auto& b = two->results[i];
    EXPECT_EQ(a.status, b.status) << i;
    EXPECT_EQ(a.final_accuracy, b.final_accuracy) << i;
    EXPECT_EQ(a.rounds_changed, b.rounds_changed) << i;
    EXPECT_EQ(a.byzantine_nodes, b.byzantine_nodes) << i;
    ASSERT_EQ(a.curve.size(), b.curve.size()) << i;
    for (std::size_t k = 0; k < a.curve.size(); ++k) EXPECT_EQ(a.curve[k].accuracy, b.curve[k].accuracy);
  }
}

TEST(RunGrid, NotApplicableSharedBaselinesAndMetrics) {
  const Grid grid = small_grid();
  auto result = run_grid(grid, RunnerOptions{.jobs = 2});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_FALSE(result->cancelled);
  std::size_t shared = 0;
  for (const auto& cell : result->cells) {
    const auto& r = result->results[cell.index];
    const bool even_deterministic = cell.setting.nodes == 6 && grid.defences[cell.defence].code == "deterministic";
    if (even_deterministic) {
      EXPECT_EQ(r.status, CellStatus::kNotApplicable) << cell.index;
      EXPECT_FALSE(r.reason.empty());
      continue;
    }
    ASSERT_EQ(r.status, CellStatus::kDone) << cell.index << ": " << r.reason;
    EXPECT_EQ(r.rounds, 10u);
    ASSERT_EQ(r.curve.size(), 3u);  // the initial model, then rounds 5 and 10
    EXPECT_EQ(r.curve[0].round, 0u);
    EXPECT_EQ(r.dimension, 8u * 4u + 4u);   // logreg: weights and biases
    EXPECT_EQ(r.download_bytes, 25u + 8u);  // round, η, λ, flag, dimension; one word of signs
    if (cell.baseline()) {
      EXPECT_EQ(r.rounds_changed, 0u);  // nothing to change without an attacker
      EXPECT_TRUE(r.byzantine_nodes.empty());
    } else {
      EXPECT_EQ(r.byzantine_nodes.size(), cell.setting.byzantine);
    }
    if (cell.same_as) {
      ++shared;
      const auto& first = result->results[*cell.same_as];
      EXPECT_EQ(first.final_accuracy, r.final_accuracy);
    }
    if (grid.defences[cell.defence].code == "identity") {
      EXPECT_DOUBLE_EQ(r.redundancy, 1.0);
    }
  }
  EXPECT_EQ(shared, 1u);  // signSGD-MV at n = 5: b = 2's baseline is b = 1's
  // The deterministic code at b = 1 (certified for b = 1) makes one reverse attacker invisible.
  for (const auto& cell : result->cells) {
    if (grid.defences[cell.defence].code == "deterministic" && cell.setting == Setting{5, 1} && !cell.baseline()) {
      EXPECT_EQ(result->results[cell.index].rounds_changed, 0u);
    }
  }
}

// Protocol attacks act on the wire: the engine's sessions (real envelopes, verifiers and
// quarantine, virtual time) run them and report what the defences did, besides the attack-free
// comparison every cell has.
TEST(RunGrid, ProtocolAttacksReportTheDefences) {
  auto parsed = parse_grid(R"({
    "base": {"data": "synthetic:examples=256,features=8,classes=4,separation=3", "model": "logreg",
             "rounds": 8, "lr": "constant:lr=0.05", "eval_every": 4, "partition_size": 16},
    "attacks": ["reverse", "equivocation", "forged_signature", "crash"],
    "defences": ["signSGD-MV"],
    "settings": [{"n": 5, "b": 1}],
    "seeds": [3],
    "baseline": false,
    "protocol_deadline_ms": 100
  })");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  auto result = run_grid(*parsed, RunnerOptions{.jobs = 2});
  ASSERT_TRUE(result.ok()) << result.error().message;
  for (const auto& cell : result->cells) {
    const auto& r = result->results[cell.index];
    ASSERT_EQ(r.status, CellStatus::kDone) << cell.attack << ": " << r.reason;
    EXPECT_EQ(r.rounds, 8u) << cell.attack;
    EXPECT_EQ(r.curve.size(), 3u) << cell.attack;  // round 0 and two evaluations
    ASSERT_EQ(r.byzantine_nodes.size(), 1u);
    EXPECT_EQ(acts_on_the_wire(cell), cell.attack != "reverse") << cell.attack;
    if (cell.attack == "reverse") {
      EXPECT_FALSE(r.defences.has_value());
      EXPECT_GT(r.rounds_changed, 0u);
      continue;
    }
    ASSERT_TRUE(r.defences.has_value()) << cell.attack;
    const DefenceOutcome& d = *r.defences;
    // Virtual time: a round waits at most its deadline (plus the server's 1 ms receive steps).
    EXPECT_LE(d.slowest_round_seconds, 0.1 + 0.01) << cell.attack;
    if (cell.attack == "equivocation") {
      EXPECT_GE(d.equivocation_proofs, 1u);
      EXPECT_EQ(d.quarantined_byzantine, 1u);
      EXPECT_EQ(d.quarantined, 1u);  // nobody else
    } else if (cell.attack == "forged_signature") {
      EXPECT_GE(d.misbehaviour_events, 3u);
      EXPECT_EQ(d.quarantined_byzantine, 1u);
      EXPECT_EQ(d.quarantined, 1u);
      EXPECT_EQ(d.equivocation_proofs, 0u);
    } else if (cell.attack == "crash") {
      EXPECT_EQ(d.missing_votes, 8u);           // the crashed node, every round
      EXPECT_EQ(d.quarantined, 0u);             // silence is not misbehaviour
      EXPECT_GE(d.slowest_round_seconds, 0.1);  // every round waited for the deadline
      // An absent vote changes the plain majority of 4 against the attack-free 5 in some rounds.
      EXPECT_LE(r.rounds_changed, 8u);
    }
  }
}

TEST(RunGrid, CancelledBeforeAnything) {
  const Grid grid = small_grid();
  RunnerOptions options;
  options.cancelled = [] { return true; };
  auto result = run_grid(grid, options);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->cancelled);
  for (const auto& cell : result->cells) {
    const auto status = result->results[cell.index].status;
    EXPECT_TRUE(status == CellStatus::kCancelled || status == CellStatus::kNotApplicable) << cell.index;
  }
}

TEST(RunGrid, CancelledMidwayStopsTheRunningCell) {
  Grid grid = small_grid();
  grid.base.rounds = 40;
  std::atomic<int> polls{0};
  RunnerOptions options;
  options.jobs = 1;
  options.cancelled = [&] { return polls.fetch_add(1) >= 8; };
  auto result = run_grid(grid, options);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->cancelled);
  std::size_t partial = 0;
  for (const auto& r : result->results) {
    EXPECT_NE(r.status, CellStatus::kDone);
    if (r.status == CellStatus::kCancelled && r.rounds > 0) {
      ++partial;
      EXPECT_LT(r.rounds, 40u);
    }
  }
  EXPECT_EQ(partial, 1u);
}

TEST(RunGrid, ProgressCountsEveryCell) {
  const Grid grid = small_grid();
  const auto cells = expand(grid);
  double work = 0;
  std::size_t to_run = 0;
  for (const auto& c : cells) {
    work += cell_work(c);
    if (!c.same_as) ++to_run;  // shared baselines are not run again
  }
  ProgressBar bar(nullptr, false, to_run, work);
  auto result = run_grid(grid, RunnerOptions{.jobs = 2, .progress = &bar});
  ASSERT_TRUE(result.ok());
  const auto status = bar.status(1.0);
  const auto expected = std::to_string(to_run) + "/" + std::to_string(to_run) + " cells 100%";
  EXPECT_NE(status.find(expected), std::string::npos) << status;
}

TEST(RunGrid, Errors) {
  Grid empty;
  EXPECT_FALSE(run_grid(empty, RunnerOptions{}).ok());
  EXPECT_FALSE(run_grid(small_grid(), nullptr, RunnerOptions{}).ok());
}

}  // namespace
}  // namespace ballot::evaluation
