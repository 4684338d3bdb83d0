#include "evaluation/tuning.h"

#include <gtest/gtest.h>

#include "evaluation/runner.h"
#include "learning/optimizer.h"

namespace ballot::evaluation {
namespace {

TEST(ScaleLr, ChangesOnlyTheBaseRate) {
  EXPECT_EQ(scale_lr("constant:lr=0.001 > cosine:rounds=200,min=0.05", 3.0).value_or(""),
            "constant:lr=0.003 > cosine:rounds=200,min=0.05");
  EXPECT_EQ(scale_lr("constant:lr=0.1", 0.1).value_or(""), "constant:lr=0.01");
  EXPECT_EQ(scale_lr("constant:lr=0.3 >warmup:rounds=10,start=0.1", 10).value_or(""),
            "constant:lr=3 > warmup:rounds=10,start=0.1");
  EXPECT_FALSE(scale_lr("constant:lr=0.1", 0.0).ok());
  EXPECT_FALSE(scale_lr("cosine:rounds=3", 2.0).ok());
}

TEST(HoldoutSplit, LastExamplesScoreTheSweep) {
  learning::TrainTestSplit data;
  data.train.num_features = 2;
  data.train.num_classes = 3;
  for (std::uint8_t i = 0; i < 12; ++i) {
    data.train.labels.push_back(i % 3);
    data.train.features.push_back(i);
    data.train.features.push_back(100 + i);
  }
  auto split = holdout_split(data, 4);
  ASSERT_TRUE(split.ok()) << split.error().message;
  EXPECT_EQ(split->train.size(), 8u);
  EXPECT_EQ(split->test.size(), 4u);
  EXPECT_EQ(split->test.num_classes, 3u);
  EXPECT_EQ(split->test.features[0], 8.0f);  // example 8 is the first held out
  EXPECT_EQ(split->test.features[1], 108.0f);
  EXPECT_EQ(split->train.features.back(), 107.0f);
  EXPECT_EQ(holdout_split(data, 0)->test.size(), 2u);  // a sixth by default
  EXPECT_FALSE(holdout_split(data, 12).ok());
}

Grid tuning_grid() {
  Grid grid;
  grid.base.data = "synthetic:examples=512,features=8,classes=4";
  grid.base.model = "logreg";
  grid.base.rounds = 12;
  grid.base.eval_every = 6;
  grid.base.eval_examples = 64;
  grid.attacks = {"reverse"};
  grid.defences = {*named_defence("signSGD-MV"), *named_defence("median/fp32")};
  grid.defences.push_back(*named_defence("mean/fp32"));
  grid.defences.back().lr = "constant:lr=0.05";  // its own rate: not tuned
  grid.settings = {{5, 1}, {7, 2}};
  grid.seeds = {2, 3};
  grid.tune_lr = LrTuning{.factors = {0.1, 1.0, 10.0}, .rounds = 6, .holdout = 100};
  return grid;
}

TEST(SweepGrid, OneAttackFreeCellPerDefenceAndFactor) {
  const Grid grid = tuning_grid();
  ASSERT_TRUE(grid.validate().ok()) << grid.validate().error().message;
  EXPECT_EQ(tuned_defences(grid), (std::vector<std::size_t>{0, 1}));
  const Grid sweep = sweep_grid(grid);
  ASSERT_TRUE(sweep.validate().ok()) << sweep.validate().error().message;
  EXPECT_FALSE(sweep.tune_lr.has_value());
  EXPECT_TRUE(sweep.attacks.empty());
  EXPECT_EQ(sweep.settings, (std::vector<Setting>{{5, 1}}));
  EXPECT_EQ(sweep.seeds, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(sweep.base.rounds, 6u);
  ASSERT_EQ(sweep.defences.size(), 6u);
  EXPECT_EQ(sweep.defences[0].name, "signSGD-MV @ lr×0.1");
  // The untuned rate is the update rule's default, its cosine over the sweep's rounds.
  EXPECT_EQ(sweep.defences[1].lr.value_or(""), learning::default_lr_schedule("sign:wd=0", 6).value_or("?"));
  EXPECT_EQ(sweep.defences[5].lr.value_or(""),
            scale_lr(learning::default_lr_schedule("sgd:momentum=0.9", 6).value_or("?"), 10.0).value_or("!"));
  std::size_t cells = 0;
  for (const auto& cell : expand(sweep)) cells += cell.same_as ? 0 : 1;
  EXPECT_EQ(cells, 6u);
}

CellResult finished(double accuracy) {
  CellResult r;
  r.status = CellStatus::kDone;
  r.final_accuracy = accuracy;
  return r;
}

// The deterministic code needs an odd n: a grid whose first setting has n = 6 sweeps at its first
// setting where every tuned defence applies (n = 7), not where one of them would keep its untuned
// rate while the others got tuned ones.
TEST(SweepGrid, RunsAtTheFirstSettingWhereEveryTunedDefenceApplies) {
  Grid grid = tuning_grid();
  grid.defences = {*named_defence("signSGD-MV"), *named_defence("deterministic")};
  grid.settings = {{6, 1}, {7, 1}, {9, 1}};
  ASSERT_TRUE(grid.validate().ok()) << grid.validate().error().message;
  EXPECT_EQ(sweep_setting(grid), (Setting{7, 1}));
  EXPECT_EQ(sweep_grid(grid).settings, (std::vector<Setting>{{7, 1}}));
  const auto cells = expand(sweep_grid(grid));
  for (const auto& cell : cells) EXPECT_FALSE(cell.not_applicable.has_value()) << cell.defence;
  // The sweeps say where they ran.
  std::vector<CellResult> results(cells.size());
  for (const auto& cell : cells) results[cell.index] = finished(0.5);
  for (const auto& sweep : choose_learning_rates(grid, cells, results)) EXPECT_EQ(sweep.setting, (Setting{7, 1}));
  grid.settings = {{6, 1}, {8, 1}};  // none: the first, where the report says it could not be tuned
  EXPECT_EQ(sweep_setting(grid), (Setting{6, 1}));
}

TEST(ChooseLearningRates, BestHeldOutAccuracyTiesTowardTheUntunedRate) {
  Grid grid = tuning_grid();
  const Grid sweep = sweep_grid(grid);
  const auto cells = expand(sweep);
  std::vector<CellResult> results(cells.size());
  // signSGD-MV: 0.5, 0.7, 0.7 (a tie: ×1 wins); median: failed, 0.4, 0.6 (×10, at the edge).
  const double accuracy[6] = {0.5, 0.7, 0.7, -1.0, 0.4, 0.6};
  for (const auto& cell : cells) {
    if (accuracy[cell.defence] < 0) {
      results[cell.index].status = CellStatus::kFailed;
      results[cell.index].reason = "boom";
    } else {
      results[cell.index] = finished(accuracy[cell.defence]);
    }
  }
  const auto sweeps = choose_learning_rates(grid, cells, results);
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_EQ(sweeps[0].defence, 0u);
  EXPECT_EQ(sweeps[0].source, "default");
  ASSERT_TRUE(sweeps[0].chosen.has_value());
  EXPECT_EQ(*sweeps[0].chosen, 1u);
  EXPECT_FALSE(sweeps[0].at_edge);
  EXPECT_EQ(sweeps[1].defence, 1u);
  EXPECT_FALSE(sweeps[1].candidates[0].done);
  EXPECT_NE(sweeps[1].candidates[0].reason.find("boom"), std::string::npos);
  ASSERT_TRUE(sweeps[1].chosen.has_value());
  EXPECT_EQ(*sweeps[1].chosen, 2u);
  EXPECT_TRUE(sweeps[1].at_edge);

  const Grid tuned = with_tuned_lr(grid, sweeps);
  EXPECT_FALSE(tuned.tune_lr.has_value());
  // The chosen factor on the grid's own schedule (cosine over its 12 rounds, not the sweep's 6).
  EXPECT_EQ(tuned.defences[0].lr.value_or(""), learning::default_lr_schedule("sign:wd=0", 12).value_or("?"));
  EXPECT_EQ(tuned.defences[1].lr.value_or(""),
            scale_lr(learning::default_lr_schedule("sgd:momentum=0.9", 12).value_or("?"), 10.0).value_or("!"));
  EXPECT_EQ(tuned.defences[2].lr.value_or(""), "constant:lr=0.05");
}

TEST(RunGridWithTuning, SweepsThenRunsTheGridAtTheChosenRates) {
  const Grid grid = tuning_grid();
  auto result = run_grid(grid, RunnerOptions{.jobs = 2});
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_EQ(result->tuning.size(), 2u);
  for (const auto& sweep : result->tuning) {
    EXPECT_EQ(sweep.holdout, 100u);
    EXPECT_EQ(sweep.rounds, 6u);
    ASSERT_TRUE(sweep.chosen.has_value());
    for (const auto& c : sweep.candidates) {
      ASSERT_TRUE(c.done) << c.reason;
      EXPECT_LE(c.accuracy, sweep.candidates[*sweep.chosen].accuracy);
    }
    // Every cell of the defence runs at the chosen rate.
    const std::string chosen = result->grid.defences[sweep.defence].lr.value_or("");
    EXPECT_EQ(chosen, scale_lr(sweep.untuned, sweep.candidates[*sweep.chosen].factor).value_or("?"));
    for (const auto& cell : result->cells) {
      if (cell.defence == sweep.defence) {
        EXPECT_EQ(cell.options.lr, chosen) << cell.index;
      }
    }
  }
  EXPECT_FALSE(result->cancelled);
  // Deterministic: the same sweep and grid again.
  auto again = run_grid(grid, RunnerOptions{.jobs = 1});
  ASSERT_TRUE(again.ok());
  for (std::size_t k = 0; k < result->tuning.size(); ++k) EXPECT_EQ(again->tuning[k].chosen, result->tuning[k].chosen);
  for (std::size_t i = 0; i < result->results.size(); ++i) {
    EXPECT_EQ(again->results[i].final_accuracy, result->results[i].final_accuracy) << i;
  }
}

TEST(RunGridWithTuning, AHoldoutLargerThanTheTrainingSetIsAnError) {
  Grid grid = tuning_grid();
  grid.tune_lr->holdout = 100000;
  auto result = run_grid(grid, RunnerOptions{.jobs = 1});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("holdout"), std::string::npos);
}

}  // namespace
}  // namespace ballot::evaluation
