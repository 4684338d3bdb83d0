#include "evaluation/grid.h"

#include <gtest/gtest.h>

#include <string>

#include "learning/optimizer.h"

namespace ballot::evaluation {
namespace {

// A grid file with every key, on synthetic data.
constexpr const char* kGridJson = R"({
  "base": {"data": "synthetic:examples=256,features=8,classes=4", "model": "logreg", "rounds": 12,
           "lr": "constant:lr=0.01", "eval_every": 4},
  "attacks": ["reverse", "random"],
  "defences": ["signSGD-MV", "bernoulli r=2", "deterministic",
               {"name": "median", "rule": "median", "codec": "fp32", "update": "sgd", "worker_momentum": 0},
               "krum:f=1/fp32"],
  "settings": [{"n": 5, "b": 1}, {"n": 6, "b": 2}],
  "seeds": [3, 4],
  "attacker_choice": "worst",
  "target_accuracy": 0.5,
  "baseline": true
})";

std::string error_of(std::string_view json) {
  auto grid = parse_grid(json);
  return grid.ok() ? std::string("(parsed)") : grid.error().message;
}

TEST(NamedDefence, BuiltInNames) {
  auto mv = named_defence("signSGD-MV");
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(mv->code, "identity");
  EXPECT_EQ(mv->rule, "vote");
  EXPECT_FALSE(mv->update.has_value());

  auto bern = named_defence("bernoulli r=2");
  ASSERT_TRUE(bern.ok());
  EXPECT_EQ(bern->code, "bernoulli:r=2");
  EXPECT_EQ(bern->name, "bernoulli r=2");
  auto bern_spec = named_defence("bernoulli:r=3");
  ASSERT_TRUE(bern_spec.ok());
  EXPECT_EQ(bern_spec->code, "bernoulli:r=3");
  EXPECT_EQ(bern_spec->name, "bernoulli r=3");  // one spelling in reports

  auto det = named_defence("deterministic");
  ASSERT_TRUE(det.ok());
  EXPECT_EQ(det->code, "deterministic");

  auto median = named_defence("median/fp32");
  ASSERT_TRUE(median.ok());
  EXPECT_EQ(median->rule, "median");
  EXPECT_EQ(median->codec, "fp32");
  EXPECT_EQ(median->update.value_or(""), "sgd:momentum=0.9");
  EXPECT_EQ(median->worker_momentum.value_or(-1.0), 0.0);
  // DGC's momentum is at the node: its receiver applies plain SGD.
  auto dgc = named_defence("median/dgc:ratio=0.05");
  ASSERT_TRUE(dgc.ok());
  EXPECT_EQ(dgc->update.value_or(""), "sgd");
  EXPECT_EQ(named_defence("median/dgc:ratio=0.05,momentum=0")->update.value_or(""), "sgd:momentum=0.9");

  EXPECT_FALSE(named_defence("").ok());
  EXPECT_FALSE(named_defence("median/").ok());
  EXPECT_FALSE(named_defence("bernoulli:r").ok());
}

TEST(SplitList, KeepsSpecOptionsTogether) {
  EXPECT_EQ(split_list("reverse, random"), (std::vector<std::string>{"reverse", "random"}));
  EXPECT_EQ(split_list("ipm:eps=0.5,x=1,reverse"), (std::vector<std::string>{"ipm:eps=0.5,x=1", "reverse"}));
  EXPECT_EQ(split_list("signSGD-MV,bernoulli r=2,,deterministic"),
            (std::vector<std::string>{"signSGD-MV", "bernoulli r=2", "deterministic"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(ParseGrid, ReadsEveryKey) {
  auto grid = parse_grid(kGridJson);
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  EXPECT_EQ(grid->base.model, "logreg");
  EXPECT_EQ(grid->base.rounds, 12u);
  EXPECT_EQ(grid->base.eval_every, 4u);
  EXPECT_EQ(grid->attacks, (std::vector<std::string>{"reverse", "random"}));
  ASSERT_EQ(grid->defences.size(), 5u);
  EXPECT_EQ(grid->defences[3].name, "median");
  EXPECT_EQ(grid->defences[3].rule, "median");
  EXPECT_EQ(grid->defences[3].update.value_or(""), "sgd");
  ASSERT_EQ(grid->settings.size(), 2u);
  EXPECT_EQ(grid->settings[1], (Setting{6, 2}));
  EXPECT_EQ(grid->seeds, (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(grid->attacker_choice, "worst");
  EXPECT_DOUBLE_EQ(grid->target_accuracy, 0.5);
}

TEST(ParseGrid, CrossProductOfNodesAndByzantine) {
  auto grid =
      parse_grid(R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "nodes": [5, 7], "byzantine": [1, 2]})");
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  EXPECT_EQ(grid->settings, (std::vector<Setting>{{5, 1}, {5, 2}, {7, 1}, {7, 2}}));
}

TEST(ParseGrid, DefaultsComeFromTheGivenGrid) {
  Grid defaults = paper_preset(40);
  auto grid = parse_grid(R"({"seeds": [7, 8]})", defaults);
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  EXPECT_EQ(grid->seeds, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ(grid->settings, defaults.settings);
  EXPECT_EQ(grid->base.rounds, 40u);
}

struct BadGrid {
  const char* json;
  const char* message;  // a fragment the error must contain (it names the entry)
};

class ParseGridErrors : public ::testing::TestWithParam<BadGrid> {};

TEST_P(ParseGridErrors, NameTheEntry) {
  const auto message = error_of(GetParam().json);
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << message;
  EXPECT_EQ(message.rfind("grid: ", 0), 0u) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseGridErrors,
    ::testing::Values(
        BadGrid{"[1]", "top level"}, BadGrid{"{not json", "not valid JSON"},
        BadGrid{R"({"atacks": []})", "unknown key 'atacks'"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}],
                    "attacker_choice": "wrost"})",
                "attacker_choice 'wrost'"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"],
                    "settings": [{"n": 5, "b": 9223372036854775810}]})",
                "needs b < n/2"},
        BadGrid{R"({"attacks": ["crash"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}],
                    "protocol_deadline_ms": -5})",
                "'protocol_deadline_ms' must be a whole number"},
        BadGrid{R"({"attacks": ["crash"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}],
                    "protocol_deadline_ms": 0})",
                "protocol_deadline_ms must be in [1, 600000]"},
        BadGrid{R"({"attacks": ["reverse", "revrse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
                "attacks[1] 'revrse'"},
        BadGrid{R"({"attacks": ["none"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})", "baseline"},
        BadGrid{R"({"attacks": ["reverse", "reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
                "listed twice"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV", {"name": "x", "rul": "median"}],
                    "settings": [{"n": 5, "b": 1}]})",
                "defences[1]: unknown key 'rul'"},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": ["signSGD-MV", "no_such_code"], "settings": [{"n": 5, "b": 1}]})",
            "defences[1] 'no_such_code'"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["no_rule/fp32"], "settings": [{"n": 5, "b": 1}]})",
                "defences[0] 'no_rule/fp32': rule"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["median/no_codec"], "settings": [{"n": 5, "b": 1}]})",
                "codec"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["vote/qsgd:s=16"], "settings": [{"n": 5, "b": 1}]})",
                "defences[0] 'vote/qsgd:s=16': codec 'qsgd:s=16' applies to the gradient path only"},
        BadGrid{R"({"attacks": ["reverse"], "defences": [{"name": "x", "rule": "vote", "codec": "topk:ratio=0.01"}],
                    "settings": [{"n": 5, "b": 1}]})",
                "defences[0] 'x': codec 'topk:ratio=0.01' applies to the gradient path only"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV", "identity"], "settings": [{"n": 5, "b": 1}]})",
                "defences[1] 'identity'"},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}, {"n": 4, "b": 2}]})",
            "settings[1] (n = 4, b = 2): needs b < n/2"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5}]})", "settings[0]"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}], "nodes": [5]})",
                "not both"},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}], "seeds": [1, -2]})",
            "seeds[1]"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}], "seeds": []})",
                "no seed"},
        BadGrid{R"({"attacks": ["reverse"], "defences": [], "settings": [{"n": 5, "b": 1}]})", "no defence"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"]})", "no setting"},
        BadGrid{R"({"attacks": [], "baseline": false, "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
                "nothing to run"},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}], "target_accuracy": 1.5})",
            "target_accuracy"},
        BadGrid{
            R"({"base": {"nodes": 9}, "attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
            "base: 'nodes' is set by the grid"},
        BadGrid{
            R"({"base": {"rounds": "many"}, "attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
            "base: "},
        BadGrid{
            R"({"base": {"lr": "constant:lr=-1"}, "attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}]})",
            "base: "},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": [{"name": "x", "lr": "constant:lr=0"}], "settings": [{"n": 5, "b": 1}]})",
            "defences[0] 'x': lr: "},
        BadGrid{
            R"({"attacks": ["reverse"], "defences": [{"name": "x", "update": "adam"}], "settings": [{"n": 5, "b": 1}]})",
            "defences[0] 'x': no default learning rate for update 'adam'"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}],
                    "tune_lr": {"factors": [1, 0]}})",
                "tune_lr: factors must be positive"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}],
                    "tune_lr": {"factor": [1]}})",
                "tune_lr: unknown key 'factor'"},
        BadGrid{R"({"attacks": ["reverse"], "defences": ["signSGD-MV"], "settings": [{"n": 5, "b": 1}], "tune_lr": 3})",
                "'tune_lr' must be true, false or an object"}));

TEST(DefenceLr, EachUpdateRuleHasItsOwnDefault) {
  Grid grid;
  grid.base.rounds = 200;
  const Defence sign = *named_defence("signSGD-MV");
  const Defence median = *named_defence("median/fp32");
  // The sign rule keeps `ballot train`'s rate; the gradient path gets sgd's (with momentum).
  EXPECT_EQ(defence_lr(grid, sign).value_or(""), "constant:lr=0.001 > cosine:rounds=200,min=0.05");
  EXPECT_EQ(defence_lr(grid, median).value_or(""), "constant:lr=0.1 > cosine:rounds=200,min=0.05");
  EXPECT_EQ(defence_lr_source(grid, median), "default");
  Defence heavy = sign;
  heavy.update = "heavyball";
  EXPECT_EQ(defence_lr(grid, heavy).value_or(""), "constant:lr=0.0003 > cosine:rounds=200,min=0.05");
  heavy.update = "sgd";
  EXPECT_EQ(defence_lr(grid, heavy).value_or(""), "constant:lr=0.3 > cosine:rounds=200,min=0.05");
  EXPECT_EQ(learning::default_lr_schedule("ef_sign", 10).value_or(""), "constant:lr=0.3 > cosine:rounds=10,min=0.05");
  EXPECT_FALSE(learning::default_lr_schedule("adam", 10).ok());
  EXPECT_FALSE(learning::default_lr_schedule("sign", 0).ok());
  // A rate given for the grid replaces the defaults; a defence's own replaces both.
  grid.lr_per_update = false;
  grid.base.lr = "constant:lr=0.02";
  EXPECT_EQ(defence_lr(grid, median).value_or(""), "constant:lr=0.02");
  EXPECT_EQ(defence_lr_source(grid, median), "base");
  Defence own = median;
  own.lr = "constant:lr=0.5";
  EXPECT_EQ(defence_lr(grid, own).value_or(""), "constant:lr=0.5");
  EXPECT_EQ(defence_lr_source(grid, own), "defence");
}

TEST(ParseGrid, LearningRateKeys) {
  const char* json = R"({"attacks": ["reverse"], "settings": [{"n": 5, "b": 1}],
    "defences": ["signSGD-MV", {"name": "median", "rule": "median", "update": "sgd", "lr": "constant:lr=0.2"}],
    "tune_lr": {"factors": [0.5, 2], "rounds": 30, "holdout": 500}})";
  auto grid = parse_grid(json);
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  EXPECT_TRUE(grid->lr_per_update);  // no "lr" in the base
  EXPECT_EQ(grid->defences[1].lr.value_or(""), "constant:lr=0.2");
  ASSERT_TRUE(grid->tune_lr.has_value());
  EXPECT_EQ(grid->tune_lr->factors, (std::vector<double>{0.5, 2}));
  EXPECT_EQ(grid->tune_lr->rounds, 30u);
  EXPECT_EQ(grid->tune_lr->holdout, 500u);
  auto plain = parse_grid(R"({"attacks": ["reverse"], "settings": [{"n": 5, "b": 1}], "defences": ["signSGD-MV"],
                              "tune_lr": true})");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->tune_lr, LrTuning{});
  // A learning rate in the base is the user's choice for every defence.
  auto given = parse_grid(kGridJson);
  ASSERT_TRUE(given.ok());
  EXPECT_FALSE(given->lr_per_update);
  for (const auto& cell : expand(*given)) EXPECT_EQ(cell.options.lr, "constant:lr=0.01") << cell.index;
}

TEST(LoadGrid, MissingFileAndExample) {
  auto missing = load_grid("/nonexistent/grid.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto directory = load_grid("/tmp");  // named as what it is, not read as text
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("/tmp"), std::string::npos) << directory.error().message;
  // Copying the base values recursed once per level of nesting: refused before parsing.
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  auto nested = parse_grid(R"({"base": {"model": )" + deep + "}}");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message.find("nested deeper than 64"), std::string::npos) << nested.error().message;
  auto example = load_grid(std::string(BALLOT_EXAMPLES_DIR) + "/evaluate_grid.json");
  ASSERT_TRUE(example.ok()) << example.error().message;
  EXPECT_FALSE(example->defences.empty());
}

TEST(PaperPreset, TheSixSetupsOfThePaper) {
  const Grid grid = paper_preset(300);
  ASSERT_TRUE(grid.validate().ok()) << grid.validate().error().message;
  EXPECT_EQ(grid.settings, (std::vector<Setting>{{5, 1}, {9, 2}, {15, 3}, {5, 2}, {9, 3}, {15, 6}}));
  EXPECT_EQ(grid.attacks, (std::vector<std::string>{"reverse"}));
  ASSERT_EQ(grid.defences.size(), 4u);
  EXPECT_EQ(grid.defences[0].code, "identity");
  EXPECT_EQ(grid.defences[1].code, "bernoulli:r=2");
  EXPECT_EQ(grid.defences[2].code, "bernoulli:r=3");
  EXPECT_EQ(grid.defences[3].code, "deterministic");
  EXPECT_TRUE(grid.baseline);
  EXPECT_EQ(grid.seeds, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(grid.base.rounds, 300u);
  EXPECT_NE(grid.base.lr.find("cosine:rounds=300"), std::string::npos);
  // The sign rule's default, as before the rules had their own: the preset's results stand.
  for (const auto& cell : expand(paper_preset(500))) {
    EXPECT_EQ(cell.options.lr, "constant:lr=0.001 > cosine:rounds=500,min=0.05") << cell.index;
  }
  EXPECT_EQ(grid.base.data, "fashion-mnist");
}

TEST(Expand, CellsBaselinesAndApplicability) {
  auto grid = parse_grid(kGridJson);
  ASSERT_TRUE(grid.ok()) << grid.error().message;
  const auto cells = expand(*grid);
  // 2 settings × 5 defences × (baseline + 2 attacks) × 2 seeds.
  ASSERT_EQ(cells.size(), 2u * 5u * 3u * 2u);
  for (std::size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(cells[i].index, i);

  std::size_t not_applicable = 0;
  for (const auto& cell : cells) {
    EXPECT_EQ(cell.options.nodes, cell.setting.nodes);
    EXPECT_EQ(cell.options.byzantine, cell.setting.byzantine);
    EXPECT_EQ(cell.options.seed, cell.seed);
    EXPECT_EQ(cell.options.attack, cell.attack);
    EXPECT_EQ(cell.options.attackers, cell.baseline() ? 0u : cell.setting.byzantine);
    EXPECT_EQ(cell.options.code, grid->defences[cell.defence].code);
    EXPECT_EQ(cell.options.model, "logreg");
    // The deterministic code needs odd n; Krum with f = 1 needs n − b ≥ 2f + 3 = 5 inputs.
    const bool deterministic_even = cell.defence == 2 && cell.setting.nodes == 6;
    const bool krum = cell.defence == 4;
    if (deterministic_even || krum) {
      ASSERT_TRUE(cell.not_applicable.has_value()) << cell.index;
      EXPECT_FALSE(cell.not_applicable->empty());
      ++not_applicable;
    } else if (cell.defence != 3 || cell.baseline()) {
      EXPECT_FALSE(cell.not_applicable.has_value()) << cell.index << ": " << cell.not_applicable.value_or("");
    }
    if (cell.defence == 3) {
      EXPECT_EQ(cell.options.rule, "median");
      EXPECT_EQ(cell.options.update, "sgd");
      EXPECT_EQ(cell.options.worker_momentum, 0.0);
    }
  }
  EXPECT_GT(not_applicable, 0u);

  // Baselines that train identically share one run: signSGD-MV, Bernoulli and median do not
  // depend on b, so their (n = 6) baselines are new and their second-setting ones are not
  // repeats either (n differs); within one setting nothing repeats. Across two settings with the
  // same n they would: check that directly.
  for (const auto& cell : cells) EXPECT_FALSE(cell.same_as.has_value());
  Grid same_n = *grid;
  same_n.settings = {{7, 1}, {7, 2}};
  const auto shared = expand(same_n);
  std::size_t repeats = 0;
  for (const auto& cell : shared) {
    if (!cell.same_as) continue;
    ++repeats;
    ASSERT_LT(*cell.same_as, cell.index);
    const Cell& first = shared[*cell.same_as];
    EXPECT_TRUE(cell.baseline() && first.baseline());
    EXPECT_EQ(first.defence, cell.defence);
    EXPECT_EQ(first.seed, cell.seed);
    EXPECT_NE(grid->defences[cell.defence].code, "deterministic");  // the deterministic code depends on b
  }
  EXPECT_EQ(repeats, 4u * 2u);  // identity, bernoulli, median, Krum (n − b ≥ 5 at n = 7) × 2 seeds
}

TEST(BaselineKey, DeterministicCodeDependsOnB) {
  runtime::TrainingOptions a;
  a.code = "deterministic";
  a.attack = "none";
  a.attackers = 0;
  a.byzantine = 1;
  runtime::TrainingOptions b = a;
  b.byzantine = 2;
  EXPECT_NE(baseline_key(a), baseline_key(b));
  a.code = b.code = "identity";
  EXPECT_EQ(baseline_key(a), baseline_key(b));
  b.seed = 9;
  EXPECT_NE(baseline_key(a), baseline_key(b));
}

}  // namespace
}  // namespace ballot::evaluation
