#include "evaluation/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "evaluation/tuning.h"
#include "xml_check.h"

namespace ballot::evaluation {
namespace {

using testing::xml_problem;

TEST(MeanSd, HandComputed) {
  const std::vector<double> values = {2, 4, 4, 4, 5, 5, 7, 9};
  const auto s = mean_sd(values);
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.sd, std::sqrt(32.0 / 7.0), 1e-12);  // sample sd: Σ(x − 5)² = 32 over n − 1 = 7
  const std::vector<double> one = {0.7};
  EXPECT_DOUBLE_EQ(mean_sd(one).mean, 0.7);
  EXPECT_DOUBLE_EQ(mean_sd(one).sd, 0.0);
  EXPECT_EQ(mean_sd(std::vector<double>{}).count, 0u);
}

CellResult done(double accuracy, std::uint64_t changed, std::optional<std::uint64_t> to_target, double r) {
  CellResult c;
  c.status = CellStatus::kDone;
  c.final_accuracy = accuracy;
  c.rounds = 100;
  c.rounds_changed = changed;
  c.rounds_to_target = to_target;
  c.redundancy = r;
  c.dimension = 1000;
  c.changed_coordinates = static_cast<double>(changed);  // per round, of d = 1000
  c.curve = {{50, accuracy / 2}, {100, accuracy}};
  return c;
}

// One setting, two defences, baseline + two attacks, two seeds, with hand-chosen results.
GridResult hand_made() {
  GridResult out;
  Grid& grid = out.grid;
  grid.base.rounds = 100;
  grid.attacks = {"reverse", "random"};
  grid.defences = {*named_defence("signSGD-MV"), *named_defence("bernoulli r=2")};
  grid.settings = {{5, 1}};
  grid.seeds = {1, 2};
  grid.target_accuracy = 0.8;
  out.cells = expand(grid);
  out.results.resize(out.cells.size());
  EXPECT_EQ(out.cells.size(), 12u);
  for (const auto& cell : out.cells) {
    const bool first = cell.seed == 1;
    CellResult& r = out.results[cell.index];
    if (cell.defence == 0) {
      if (cell.attack == "none") r = done(first ? 0.80 : 0.84, 0, first ? 200 : 220, 1.0);
      if (cell.attack == "reverse")
        r = done(first ? 0.50 : 0.70, first ? 40 : 60, first ? std::optional<std::uint64_t>(300) : std::nullopt, 1.0);
      if (cell.attack == "random") r = done(first ? 0.75 : 0.79, 0, std::nullopt, 1.0);
    } else {
      if (cell.attack == "none") r = done(0.85, 0, 100, 2.25);
      if (cell.attack == "reverse") {
        if (first) {
          r = done(0.65, 10, std::nullopt, 2.25);
        } else {
          r.status = CellStatus::kFailed;
          r.reason = "boom";
        }
      }
      if (cell.attack == "random") r = done(first ? 0.60 : 0.64, 5, std::nullopt, 2.25);
    }
  }
  out.jobs = 2;
  out.seconds = 12.5;
  return out;
}

TEST(Aggregate, MeanSdOverSeedsAndTheWorstCase) {
  const auto result = hand_made();
  const auto aggregates = aggregate(result);
  ASSERT_EQ(aggregates.size(), 6u);  // 2 defences × 3 columns
  const auto& a_reverse = aggregates[1];
  EXPECT_EQ(a_reverse.defence, 0u);
  EXPECT_EQ(a_reverse.attack, "reverse");
  EXPECT_EQ(a_reverse.done, 2u);
  EXPECT_NEAR(a_reverse.accuracy.mean, 0.60, 1e-12);
  EXPECT_NEAR(a_reverse.accuracy.sd, std::sqrt(0.02), 1e-12);  // (0.1² + 0.1²) / 1
  EXPECT_EQ(a_reverse.reached, 1u);
  EXPECT_DOUBLE_EQ(a_reverse.rounds_to_target.mean, 300.0);
  EXPECT_NEAR(a_reverse.changed_fraction.mean, 0.5, 1e-12);
  ASSERT_EQ(a_reverse.curve.size(), 2u);
  EXPECT_NEAR(a_reverse.curve[1].second, 0.60, 1e-12);
  EXPECT_NEAR(a_reverse.curve[0].second, 0.30, 1e-12);

  const auto& b_reverse = aggregates[4];
  EXPECT_EQ(b_reverse.done, 1u);
  EXPECT_EQ(b_reverse.seeds, 2u);
  EXPECT_EQ(b_reverse.first_status, CellStatus::kFailed);
  EXPECT_EQ(b_reverse.reason, "boom");
  EXPECT_EQ(b_reverse.curve.size(), 2u);  // the one finished seed

  const auto worst_a = worst_case(aggregates, {5, 1}, 0);
  ASSERT_TRUE(worst_a.has_value());
  EXPECT_NEAR(worst_a->accuracy, 0.60, 1e-12);
  EXPECT_EQ(worst_a->attack, "reverse");
  EXPECT_TRUE(worst_a->complete);
  const auto worst_b = worst_case(aggregates, {5, 1}, 1);
  ASSERT_TRUE(worst_b.has_value());
  EXPECT_NEAR(worst_b->accuracy, 0.62, 1e-12);  // random (0.60, 0.64) is below reverse's one seed (0.65)
  EXPECT_EQ(worst_b->attack, "random");
  EXPECT_FALSE(worst_b->complete);
  EXPECT_FALSE(worst_case(aggregates, {7, 1}, 0).has_value());
}

TEST(Aggregate, NotApplicableAttacksLeaveTheWorstCaseComplete) {
  auto result = hand_made();
  for (const auto& cell : result.cells) {
    if (cell.defence == 0 && cell.attack == "random") {
      result.results[cell.index] = {};
      result.results[cell.index].status = CellStatus::kNotApplicable;
      result.results[cell.index].reason = "does not apply";
    }
  }
  const auto aggregates = aggregate(result);
  EXPECT_EQ(aggregates[2].done, 0u);
  EXPECT_EQ(aggregates[2].first_status, CellStatus::kNotApplicable);
  const auto worst = worst_case(aggregates, {5, 1}, 0);
  ASSERT_TRUE(worst.has_value());
  EXPECT_EQ(worst->attack, "reverse");
  EXPECT_TRUE(worst->complete);
  const auto md = markdown_report(result, aggregates, {}, {});
  // The worst case names the attack it is not over, and the worst-case table marks it.
  EXPECT_NE(md.find("| signSGD-MV | 1.00 | 82.0 ± 2.8 | 60.0 ± 14.1 | n/a | **60.0** (reverse; n/a: random) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| signSGD-MV | 60.0† |"), std::string::npos) << md;
  EXPECT_NE(md.find("`†`: over fewer of the grid's attacks"), std::string::npos) << md;
  EXPECT_NE(md.find("n = 5, b = 1, signSGD-MV, random: not applicable — does not apply"), std::string::npos) << md;
}

// One seed not applicable and the other failed: the failed seed is a gap in the worst case even
// though the first non-finished seed was only "not applicable".
TEST(Aggregate, AFailedSeedAfterANotApplicableOneLeavesTheWorstCaseIncomplete) {
  auto result = hand_made();
  for (const auto& cell : result.cells) {
    if (cell.defence == 0 && cell.attack == "random") {
      result.results[cell.index] = {};
      result.results[cell.index].status = cell.seed == 1 ? CellStatus::kNotApplicable : CellStatus::kFailed;
      result.results[cell.index].reason = cell.seed == 1 ? "does not apply" : "boom";
    }
  }
  const auto aggregates = aggregate(result);
  EXPECT_EQ(aggregates[2].first_status, CellStatus::kNotApplicable);
  EXPECT_EQ(aggregates[2].unfinished, 1u);
  const auto worst = worst_case(aggregates, {5, 1}, 0);
  ASSERT_TRUE(worst.has_value());
  EXPECT_FALSE(worst->complete);
}

// An attack that failed for every seed is named beside the worst case it is missing from (it is no
// longer lower than the rest for free), and an attack that applies to some seeds only makes the
// worst case a mean over fewer seeds.
TEST(Aggregate, AnAttackThatFailedOrAppliedToSomeSeedsOnlyIsMarkedInTheWorstCase) {
  auto result = hand_made();
  for (const auto& cell : result.cells) {
    if (cell.defence == 0 && cell.attack == "reverse") {
      result.results[cell.index] = {};
      result.results[cell.index].status = CellStatus::kFailed;
      result.results[cell.index].reason = "boom";
    }
    if (cell.defence == 0 && cell.attack == "random" && cell.seed == 2) {
      result.results[cell.index] = {};
      result.results[cell.index].status = CellStatus::kNotApplicable;
      result.results[cell.index].reason = "no code for this seed";
    }
  }
  const auto aggregates = aggregate(result);
  const auto worst = worst_case(aggregates, {5, 1}, 0);
  ASSERT_TRUE(worst.has_value());
  EXPECT_EQ(worst->attack, "random");
  EXPECT_NEAR(worst->accuracy, 0.75, 1e-12);  // seed 1 alone
  EXPECT_FALSE(worst->complete);
  EXPECT_EQ(worst->unfinished, std::vector<std::string>{"reverse"});
  EXPECT_TRUE(worst->not_applicable.empty());
  const auto md = markdown_report(result, aggregates, {}, {});
  EXPECT_NE(md.find("| **75.0** (random; did not finish: reverse)* |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | 75.0*† |"), std::string::npos) << md;

  // Nothing finished: "did not finish", not "n/a" (the one-setting worst-case table's row).
  for (const auto& cell : result.cells) {
    if (cell.defence == 0 && cell.attack == "random") {
      result.results[cell.index] = {};
      result.results[cell.index].status = CellStatus::kFailed;
      result.results[cell.index].reason = "boom";
    }
  }
  const auto none = aggregate(result);
  EXPECT_FALSE(worst_case(none, {5, 1}, 0).has_value());
  const auto md_none = markdown_report(result, none, {}, {});
  EXPECT_NE(md_none.find("| signSGD-MV | 1.00 | 82.0 ± 2.8 | failed | failed | did not finish |"), std::string::npos)
      << md_none;
  EXPECT_NE(md_none.find("| signSGD-MV | did not finish |\n"), std::string::npos) << md_none;
}

TEST(MarkdownReport, TablesWithHandComputedCells) {
  const auto result = hand_made();
  const auto aggregates = aggregate(result);
  const auto figures = make_figures(result, aggregates);
  ReportOptions options;
  options.command = "ballot evaluate --test";
  const auto md = markdown_report(result, aggregates, figures, options);
  EXPECT_NE(md.find("```sh\nballot evaluate --test\n```"), std::string::npos);
  EXPECT_NE(md.find("## n = 5, b = 1"), std::string::npos);
  EXPECT_NE(md.find("| defence | r | no attack | reverse | random | worst case |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | 1.00 | 82.0 ± 2.8 | 60.0 ± 14.1 | 77.0 ± 2.8 | **60.0** (reverse) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| bernoulli r=2 | 2.25 | 85.0 ± 0.0 | 65.0* | 62.0 ± 2.8 | **62.0** (random)* |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| signSGD-MV | 210 (2/2) | 300 (1/2) | never |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | 50.0 ± 14.1 | 0.0 ± 0.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| bernoulli r=2 | 10.0 | 5.0 ± 0.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | 5.000 ± 1.414 | 0.000 ± 0.000 |"), std::string::npos) << md;  // 40, 60 of 1000
  EXPECT_NE(md.find("## Worst case over attacks"), std::string::npos);
  EXPECT_NE(md.find("| signSGD-MV | 60.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| bernoulli r=2 | 62.0* |"), std::string::npos) << md;
  EXPECT_NE(md.find("n = 5, b = 1, bernoulli r=2, reverse: failed — boom"), std::string::npos) << md;
  EXPECT_NE(md.find("](figures/accuracy_n5_b1.svg)"), std::string::npos);
  EXPECT_NE(md.find("](figures/worst_case.svg)"), std::string::npos);
}

// The colour of `label`'s legend entry: the stroke of the line drawn just before its text.
std::string legend_colour(const std::string& svg, const std::string& label) {
  const auto legend = svg.find("class=\"legend\"");
  if (legend == std::string::npos) return "";
  const auto text = svg.find(">" + label + "</text>", legend);
  if (text == std::string::npos) return "";
  const auto stroke = svg.rfind("stroke=\"#", text);
  return stroke == std::string::npos ? "" : svg.substr(stroke + 8, 7);
}

TEST(Figures, OnePerSettingWorstCaseAgainstBAndTheHeatMap) {
  const auto result = hand_made();
  const auto aggregates = aggregate(result);
  const auto figures = make_figures(result, aggregates);
  ASSERT_EQ(figures.size(), 4u);
  EXPECT_EQ(figures[0].file, "figures/accuracy_n5_b1.svg");
  EXPECT_EQ(figures[1].file, "figures/worst_case.svg");
  EXPECT_EQ(figures[2].file, "figures/accuracy_vs_b.svg");
  EXPECT_EQ(figures[3].file, "figures/worst_case_heatmap.svg");
  for (const auto& f : figures) EXPECT_EQ(xml_problem(f.svg, "svg"), "") << f.file;
  // Accuracy against rounds: a panel per attack, the attack-free one first, a line per defence.
  EXPECT_NE(figures[0].svg.find(">no attack</text>"), std::string::npos);
  EXPECT_NE(figures[0].svg.find(">reverse</text>"), std::string::npos);
  EXPECT_NE(figures[1].svg.find(">Byzantine nodes b</text>"), std::string::npos);
  EXPECT_NE(figures[2].svg.find(">random</text>"), std::string::npos);
  EXPECT_NE(figures[3].svg.find(">60.0</text>"), std::string::npos);  // signSGD-MV's worst case
  EXPECT_NE(figures[3].svg.find(">b = 1</text>"), std::string::npos);
  // One colour per defence in every figure with lines.
  for (std::size_t f = 0; f < 3; ++f) {
    EXPECT_EQ(legend_colour(figures[f].svg, "signSGD-MV"), palette_colour(0)) << figures[f].file;
    EXPECT_EQ(legend_colour(figures[f].svg, "bernoulli r=2"), palette_colour(1)) << figures[f].file;
  }
}

TEST(Figures, ColoursFollowTheDefenceEvenWhenOneHasNoLine) {
  auto result = hand_made();
  for (const auto& cell : result.cells) {
    if (cell.defence == 0) {
      result.results[cell.index] = {};
      result.results[cell.index].status = CellStatus::kFailed;
      result.results[cell.index].reason = "boom";
    }
  }
  const auto aggregates = aggregate(result);
  std::size_t checked = 0;
  for (const auto& f : make_figures(result, aggregates)) {
    if (f.file == "figures/worst_case_heatmap.svg") continue;
    EXPECT_EQ(legend_colour(f.svg, "bernoulli r=2"), palette_colour(1)) << f.file;
    ++checked;
  }
  EXPECT_GE(checked, 3u);  // the figures with lines
}

TEST(Figures, CurvesStartAtRoundZero) {
  auto result = hand_made();
  for (auto& r : result.results) {
    if (r.status == CellStatus::kDone) r.curve.insert(r.curve.begin(), CurvePoint{0, 0.1});
  }
  const auto aggregates = aggregate(result);
  ASSERT_FALSE(aggregates[0].curve.empty());
  EXPECT_EQ(aggregates[0].curve.front(), (std::pair<double, double>{0.0, 0.1}));
  const auto json = nlohmann::json::parse(results_json(result));
  EXPECT_EQ(json["cells"][0]["curve"][0], nlohmann::json::parse("[0, 0.1]"));
}

TEST(MarkdownReport, PerDefenceSetupAndTheAttackFreeCheck) {
  auto result = hand_made();
  result.grid.defences.push_back(*named_defence("median/fp32"));
  for (auto& r : result.results) r.upload_bytes = 136, r.download_bytes = 136;
  // Expand again with the third defence (its cells: none finished but the baseline).
  const auto old_cells = result.cells;
  const auto old_results = result.results;
  result.cells = expand(result.grid);
  result.results.assign(result.cells.size(), {});
  for (const auto& cell : result.cells) {
    if (cell.defence < 2) {
      for (const auto& old : old_cells) {
        if (old.defence == cell.defence && old.attack == cell.attack && old.seed == cell.seed) {
          result.results[cell.index] = old_results[old.index];
        }
      }
    } else {
      result.results[cell.index] = cell.attack == "none" ? done(0.40, 0, std::nullopt, 1.0) : CellResult{};
      if (cell.attack != "none") result.results[cell.index].status = CellStatus::kNotApplicable;
      result.results[cell.index].upload_bytes = 4136;
      // A sparse decision's bytes vary by run: the table shows the mean over the rounds of the cells.
      result.results[cell.index].download_bytes = cell.seed == 1 ? 4016 : 4020;
    }
  }
  const auto aggregates = aggregate(result);
  const auto md = markdown_report(result, aggregates, {});
  // Everything that differs between defences, per defence.
  EXPECT_NE(md.find("| defence | path | code | rule | codec | update rule | learning rate | lr from |"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| signSGD-MV | sign vote | `identity` | `vote` | 1-bit signs | `sign:wd=0` | "
              "`constant:lr=0.001 > cosine:rounds=100,min=0.05` | the update rule's default | 0.90 (per partition) | "
              "none | 136 B | 136 B |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| median/fp32 | gradient | – | `median` | `fp32` | `sgd:momentum=0.9"), std::string::npos) << md;
  EXPECT_NE(md.find("`constant:lr=0.1 > cosine:rounds=100,min=0.05` | the update rule's default | none | 0.90 | 4136 B "
                    "| 4018 B |"),
            std::string::npos)
      << md;
  // Attack-free accuracy: bernoulli is best (85.0), signSGD-MV 3 points and median 45 behind.
  EXPECT_NE(md.find("| bernoulli r=2 | 85.0 (best) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | 82.0 (−3.0) |"), std::string::npos) << md;
  EXPECT_NE(md.find("**More than 2 points behind the best defence without any attack**"), std::string::npos) << md;
  EXPECT_NE(
      md.find("- **median/fp32** (up to 45.0 points behind; n = 5, b = 1): its learning rate "
              "`constant:lr=0.1 > cosine:rounds=100,min=0.05` is the default of its update rule `sgd:momentum=0.9`, "
              "not tuned for this grid: rerun with --tune-lr."),
      std::string::npos)
      << md;
}

TEST(MarkdownReport, TheLearningRateSweep) {
  auto result = hand_made();
  LrSweep sweep;
  sweep.defence = 0;
  sweep.untuned = "constant:lr=0.001 > cosine:rounds=100,min=0.05";
  sweep.source = "default";
  sweep.setting = {5, 1};
  sweep.seed = 1;
  sweep.rounds = 100;
  sweep.holdout = 10000;
  for (double f : {0.1, 1.0, 10.0}) {
    LrCandidate c;
    c.factor = f;
    c.schedule = *scale_lr(sweep.untuned, f);
    c.done = f != 10.0;
    c.status = c.done ? "done" : "failed";
    c.reason = c.done ? "" : "boom";
    c.accuracy = f == 1.0 ? 0.81 : 0.5;
    sweep.candidates.push_back(c);
  }
  sweep.chosen = 1;
  result.tuning = {sweep};
  result.grid.defences[0].lr = sweep.untuned;
  const auto aggregates = aggregate(result);
  const auto md = markdown_report(result, aggregates, {});
  EXPECT_NE(md.find("### Learning-rate sweep"), std::string::npos) << md;
  EXPECT_NE(md.find("without its last 10000 examples"), std::string::npos) << md;
  EXPECT_NE(md.find("| defence | untuned lr | ×0.1 | ×1 | ×10 | chosen lr |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | `constant:lr=0.001 > cosine:rounds=100,min=0.05` | 50.0 | **81.0** | failed | "
                    "`constant:lr=0.001 > cosine:rounds=100,min=0.05` |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("tuned: ×1 the update rule's default rate"), std::string::npos) << md;
  // Tuned, and still behind without attack: the report says the gap is the method's.
  EXPECT_NE(md.find("- **signSGD-MV** (up to 3.0 points behind; n = 5, b = 1): its learning rate was tuned"),
            std::string::npos)
      << md;
  const auto json = nlohmann::json::parse(results_json(result));
  ASSERT_EQ(json["tuning"].size(), 1u);
  EXPECT_EQ(json["tuning"][0]["defence"], "signSGD-MV");
  EXPECT_EQ(json["tuning"][0]["candidates"][1]["holdout_accuracy"], 0.81);
  EXPECT_EQ(json["tuning"][0]["candidates"][2]["status"], "failed");
  EXPECT_EQ(json["tuning"][0]["candidates"][2]["reason"], "boom");

  // A defence none of whose candidates ran (it does not apply at the sweep's setting) was not
  // tuned, and the report says so instead of blaming the method.
  for (auto& c : result.tuning[0].candidates) {
    c.done = false;
    c.status = "not applicable";
    c.reason = "the deterministic code needs an odd n";
  }
  result.tuning[0].chosen.reset();
  const auto untuned = markdown_report(result, aggregates, {});
  EXPECT_NE(untuned.find("| not applicable | not applicable | not applicable | none finished |"), std::string::npos)
      << untuned;
  EXPECT_NE(untuned.find("its learning rate could not be tuned (none of its sweep runs finished at n = 5, b = 1"),
            std::string::npos)
      << untuned;
}

TEST(ResultsJson, EveryCellWithOptionsAndMetrics) {
  const auto result = hand_made();
  const auto json = nlohmann::json::parse(results_json(result));
  ASSERT_EQ(json["cells"].size(), 12u);
  EXPECT_EQ(json["grid"]["attacks"], nlohmann::json({"reverse", "random"}));
  EXPECT_EQ(json["grid"]["defences"][1]["code"], "bernoulli:r=2");
  EXPECT_EQ(json["jobs"], 2);
  const auto& first = json["cells"][0];
  EXPECT_EQ(first["attack"], "none");
  EXPECT_EQ(first["status"], "done");
  EXPECT_EQ(first["options"]["nodes"], 5);
  EXPECT_EQ(first["options"]["code"], "identity");
  EXPECT_DOUBLE_EQ(first["final_accuracy"].get<double>(), 0.80);
  EXPECT_EQ(first["rounds_to_target"], 200);
  EXPECT_EQ(first["curve"], nlohmann::json::parse("[[50, 0.4], [100, 0.8]]"));
  bool saw_never = false, saw_failed = false;
  for (const auto& cell : json["cells"]) {
    if (cell.contains("rounds_to_target") && cell["rounds_to_target"] == "never") saw_never = true;
    if (cell["status"] == "failed") {
      saw_failed = true;
      EXPECT_EQ(cell["reason"], "boom");
      EXPECT_FALSE(cell.contains("final_accuracy"));
    }
  }
  EXPECT_TRUE(saw_never);
  EXPECT_TRUE(saw_failed);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A small grid run end to end on synthetic data: files, JSON, tables and well-formed SVG.
// The report directory is checked before a grid runs: created with figures/, and an unwritable
// one (here under a regular file) is a kIo error at once. Nothing is left behind by the check.
TEST(WriteReport, PrepareReportDirCreatesItOrSaysWhyNot) {
  const auto root = std::filesystem::temp_directory_path() / ("ballot_prepare_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  ASSERT_TRUE(prepare_report_dir(root / "report").ok());
  EXPECT_TRUE(std::filesystem::is_directory(root / "report" / "figures"));
  EXPECT_TRUE(std::filesystem::is_empty(root / "report" / "figures"));
  std::ofstream(root / "a-file") << "not a directory";
  const auto blocked = prepare_report_dir(root / "a-file" / "report");
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.error().code, ErrorCode::kIo);
  EXPECT_NE(blocked.error().message.find("a-file"), std::string::npos) << blocked.error().message;
  // A directory where results.json or report.md goes.
  for (const char* name : {"results.json", "report.md"}) {
    const auto dir = root / (std::string("taken-") + name);
    std::filesystem::create_directories(dir / name);
    const auto taken = prepare_report_dir(dir);
    ASSERT_FALSE(taken.ok()) << name;
    EXPECT_NE(taken.error().message.find(name), std::string::npos) << taken.error().message;
  }
  // An old report is left as it is.
  std::ofstream(root / "report" / "report.md") << "old";
  ASSERT_TRUE(prepare_report_dir(root / "report").ok());
  EXPECT_EQ(std::filesystem::file_size(root / "report" / "report.md"), 3u);
  EXPECT_FALSE(std::filesystem::exists(root / "report" / ".ballot-write-probe"));
  std::filesystem::remove_all(root);
}

TEST(WriteReport, EndToEndOnSyntheticData) {
  auto grid = parse_grid(R"({
    "base": {"data": "synthetic:examples=256,features=8,classes=4,separation=3", "model": "logreg",
             "rounds": 12, "lr": "constant:lr=0.05", "eval_every": 4, "partition_size": 16},
    "attacks": ["reverse", "random"],
    "defences": ["signSGD-MV", "deterministic", "krum:f=1/fp32"],
    "settings": [{"n": 5, "b": 1}, {"n": 5, "b": 2}],
    "seeds": [1, 2],
    "target_accuracy": 0.5
  })");
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  RunnerOptions options;
  options.jobs = 2;
  auto result = run_grid(*grid, options);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const auto dir = std::filesystem::temp_directory_path() / ("ballot_eval_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_report(*result, dir, {.title = "Test grid", .command = "ballot evaluate --grid g.json"}).ok());

  const auto json = nlohmann::json::parse(read_file(dir / "results.json"));
  ASSERT_EQ(json["cells"].size(), result->cells.size());
  std::size_t ran = 0, not_applicable = 0;
  for (const auto& cell : json["cells"]) {
    if (cell["status"] == "done") {
      ++ran;
      EXPECT_EQ(cell["rounds"], 12);
      ASSERT_EQ(cell["curve"].size(), 4u);  // the initial model, rounds 4, 8, 12
      EXPECT_EQ(cell["curve"][0][0], 0);
      EXPECT_GE(cell["final_accuracy"].get<double>(), 0.0);
      if (cell["attack"] != "none") {
        EXPECT_EQ(cell["byzantine_nodes"].size(), cell["b"].get<std::size_t>());
      }
    } else {
      EXPECT_EQ(cell["status"], "not applicable") << cell.dump();
      EXPECT_EQ(cell["defence"], "krum:f=1/fp32");  // Krum needs n − b ≥ 5
      ++not_applicable;
    }
  }
  EXPECT_GT(ran, 0u);
  EXPECT_EQ(not_applicable, 2u * 3u * 2u);

  const auto md = read_file(dir / "report.md");
  EXPECT_NE(md.find("# Test grid"), std::string::npos);
  EXPECT_NE(md.find("## n = 5, b = 2"), std::string::npos);
  EXPECT_NE(md.find("| defence | r | no attack | reverse | random | worst case |"), std::string::npos) << md;
  EXPECT_NE(md.find("| krum:f=1/fp32 | - | n/a | n/a | n/a | n/a |"), std::string::npos) << md;
  EXPECT_NE(md.find("| deterministic |"), std::string::npos);
  EXPECT_NE(md.find("not applicable —"), std::string::npos);

  std::size_t svgs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "figures")) {
    ++svgs;
    EXPECT_EQ(xml_problem(read_file(entry.path()), "svg"), "") << entry.path();
  }
  EXPECT_EQ(svgs, 5u);  // two settings, the worst case, accuracy against b and the heat map
  std::filesystem::remove_all(dir);
}

// Protocol attacks: the table of what the defences did, and their defences in the JSON beside the
// attack-free comparison every cell has.
TEST(WriteReport, ProtocolAttacksGetTheDefencesTable) {
  auto grid = parse_grid(R"({
    "base": {"data": "synthetic:examples=256,features=8,classes=4,separation=3", "model": "logreg",
             "rounds": 6, "lr": "constant:lr=0.05", "eval_every": 3, "partition_size": 16},
    "attacks": ["random", "forged_signature", "replay"],
    "defences": ["signSGD-MV"],
    "settings": [{"n": 5, "b": 1}],
    "seeds": [1, 2],
    "baseline": false,
    "protocol_deadline_ms": 100
  })");
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  auto result = run_grid(*grid, RunnerOptions{.jobs = 2});
  ASSERT_TRUE(result.ok()) << result.error().message;
  const auto dir = std::filesystem::temp_directory_path() / ("ballot_eval_protocol_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_report(*result, dir, {.title = "Protocol"}).ok());

  const auto json = nlohmann::json::parse(read_file(dir / "results.json"));
  EXPECT_EQ(json["grid"]["protocol_deadline_ms"], 100);
  for (const auto& cell : json["cells"]) {
    ASSERT_EQ(cell["status"], "done") << cell.dump();
    EXPECT_EQ(cell["engine"], "lockstep");
    EXPECT_TRUE(cell.contains("rounds_changed"));
    if (cell["attack"] == "forged_signature" || cell["attack"] == "replay") {
      // A forged signature is evidence and quarantines; a replayed old message is stale, which is
      // counted as lateness and never quarantines (docs/security.md).
      EXPECT_EQ(cell["defences"]["quarantined_byzantine"], cell["attack"] == "forged_signature" ? 1 : 0) << cell.dump();
    } else {
      EXPECT_FALSE(cell.contains("defences"));
    }
  }
  const auto md = read_file(dir / "report.md");
  EXPECT_NE(md.find("what the defences did"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | replay |"), std::string::npos) << md;
  EXPECT_NE(md.find("| signSGD-MV | forged_signature |"), std::string::npos) << md;
  EXPECT_NE(md.find("1.0 of 1"), std::string::npos) << md;  // the forging node quarantined in both seeds
  EXPECT_NE(md.find("| signSGD-MV | "), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ballot::evaluation
