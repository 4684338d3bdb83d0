#include "robust/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>

#include "core/spec.h"
#include "robust/coordinate_wise.h"
#include "robust/krum.h"
#include "robust/pre_aggregators.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

TEST(Registry, EveryNameBuildsAndItsSpecRoundTrips) {
  for (const auto& name : rule_names()) {
    auto rule = make_aggregator(name);
    ASSERT_TRUE(rule.ok()) << name << ": " << rule.error().to_string();
    const std::string canonical = (*rule)->spec();
    auto again = make_aggregator(canonical);
    ASSERT_TRUE(again.ok()) << canonical;
    EXPECT_EQ((*again)->spec(), canonical);
  }
  for (const auto& name : pre_aggregator_names()) {
    auto stage = make_pre_aggregator(name);
    ASSERT_TRUE(stage.ok()) << name;
    EXPECT_TRUE(make_pre_aggregator((*stage)->spec()).ok());
  }
  EXPECT_EQ(rule_names().size(), rule_table().size());
  EXPECT_EQ(pre_aggregator_names().size(), pre_aggregator_table().size());
}

TEST(Registry, EveryTableLineIsWellFormed) {
  std::set<std::string> names;
  for (const RuleEntry& entry : rule_table()) {
    EXPECT_TRUE(names.insert(std::string(entry.name)).second) << entry.name;
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    ASSERT_EQ(Spec::parse(entry.example).value().name(), entry.name);
    // Every key the line lists is known (a value may still be refused), and its example builds with f=2.
    for (const std::string& key : key_set(entry.keys)) {
      const auto made = make_aggregator(std::string(entry.name) + ":" + key + "=1");
      EXPECT_TRUE(made.ok() || made.error().message.find("unknown option") == std::string::npos)
          << entry.name << " " << key;
    }
    EXPECT_TRUE(make_aggregator(example_with_f(entry, 2)).ok()) << entry.name;
  }
  for (const PreAggregatorEntry& entry : pre_aggregator_table()) {
    EXPECT_TRUE(names.insert(std::string(entry.name)).second) << entry.name;
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    ASSERT_EQ(Spec::parse(entry.example).value().name(), entry.name);
    EXPECT_TRUE(make_pre_aggregator(example_with_f(entry, 2)).ok()) << entry.name;
  }
}

// docs/robust.md cannot fall behind the table: each name appears there as a registry string.
TEST(Registry, DocsListEveryEntry) {
  std::ifstream file(std::string(BALLOT_SOURCE_DIR) + "/docs/robust.md");
  ASSERT_TRUE(file.good());
  const std::string docs((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto documented = [&docs](std::string_view name) {
    const std::string row = "| `" + std::string(name);
    return docs.find(row + "`") != std::string::npos || docs.find(row + ":") != std::string::npos;
  };
  for (const RuleEntry& entry : rule_table())
    EXPECT_TRUE(documented(entry.name)) << entry.name << " is missing from docs/robust.md";
  for (const PreAggregatorEntry& entry : pre_aggregator_table())
    EXPECT_TRUE(documented(entry.name)) << entry.name << " is missing from docs/robust.md";
}

TEST(Registry, OptionsReachTheRule) {
  auto rule = make_aggregator("multi_krum: f=2, m=4, threads=3");
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ((*rule)->spec(), "multi_krum:f=2,m=4,threads=3");
  EXPECT_FALSE((*rule)->check(6).ok());
  EXPECT_TRUE((*rule)->check(7).ok());
  auto gm = make_aggregator("geometric_median:nu=0.001,tolerance=1e-5,max_iterations=7");
  ASSERT_TRUE(gm.ok());
  EXPECT_EQ((*gm)->spec(), "geometric_median:f=0,max_iterations=7,nu=0.001,tolerance=1e-05");
}

TEST(Registry, ErrorsNameTheProblem) {
  struct Bad {
    const char* text;
    const char* mentions;
  };
  for (const auto& bad :
       {Bad{"krun:f=1", "unknown aggregation rule 'krun'"}, Bad{"krum:g=1", "g"}, Bad{"krum:f=x", "integer"},
        Bad{"krum:f=-1", ">= 0"}, Bad{"krum > nnm:f=1", "is a pre-aggregator"}, Bad{"krum > median", "is a rule"},
        Bad{"nnm:f=1", "pre-aggregator"}, Bad{"centered_clipping:start=mean", "start"},
        Bad{"centered_clipping:tau=0", "tau"}, Bad{"clipping:tau=-2 > mean", "tau"},
        Bad{"bucketing:s=0 > mean", ">= 1"}, Bad{"mean:threads=0", ">= 1"}, Bad{"", ""}, Bad{"nnm:f=1 >", ""}}) {
    auto rule = make_aggregator(bad.text);
    ASSERT_FALSE(rule.ok()) << bad.text;
    EXPECT_EQ(rule.error().code, ErrorCode::kInvalidArgument) << bad.text;
    EXPECT_NE(rule.error().message.find(bad.mentions), std::string::npos) << bad.text << ": " << rule.error().message;
  }
}

TEST(Pipeline, EqualsTheStagesAppliedByHand) {
  const std::size_t n = 9, d = 40;
  const auto rows = testing::gaussian_rows(n, d, 5);
  auto pipeline = make_aggregator("nnm:f=2 > krum:f=2");
  ASSERT_TRUE(pipeline.ok());
  EXPECT_EQ((*pipeline)->spec(), "nnm:f=2 > krum:f=2");
  auto result = (*pipeline)->aggregate(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(result.ok());
  auto mixed = NearestNeighborMixing(NearestNeighborMixingOptions{2, 1}).apply(InputMatrix(rows.data(), n, d));
  ASSERT_TRUE(mixed.ok());
  auto by_hand = Krum(KrumOptions{2, 1}).aggregate(mixed->output.view());
  ASSERT_TRUE(by_hand.ok());
  EXPECT_EQ(result->value, by_hand->value);
  EXPECT_EQ(result->report.selected, by_hand->report.selected);
}

// Clipping and ARC in front of the mean are not written out (the mean reads their input with the
// row factors): the value and the report must be those of the stages applied by hand.
TEST(Pipeline, ARescalingStageBeforeTheMeanGivesTheBitsOfItsWrittenOutput) {
  testing::for_each_isa([] {
    for (const char* stage : {"clipping:tau=40", "arc:f=2", "bucketing:s=2 > clipping:tau=40"}) {
      for (std::size_t n : {5u, 7u, 16u, 17u, 26u}) {
        for (std::size_t d : {1u, 17u, 2049u}) {
          for (int poison = 0; poison < 3; ++poison) {  // none, a NaN, an infinity
            auto rows = testing::gaussian_rows(n, d, n * 31 + d, 1.0);
            // Rows of different lengths, so that some are clipped and some are not.
            for (std::size_t i = 0; i < n; ++i)
              for (std::size_t j = 0; j < d; ++j) rows[i * d + j] *= static_cast<float>(1 + (i % 4) * 3);
            if (poison > 0)
              rows[2 * d + d / 2] =
                  poison == 1 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
            for (std::size_t threads : {1u, 3u}) {
              const std::string spec = std::string(stage) + " > mean:threads=" + std::to_string(threads);
              SCOPED_TRACE(spec + " n=" + std::to_string(n) + " d=" + std::to_string(d) +
                           " poison=" + std::to_string(poison));
              auto fused = make_aggregator(spec);
              ASSERT_TRUE(fused.ok());
              auto got = (*fused)->aggregate(InputMatrix(rows.data(), n, d));
              // By hand: every stage written out, then the mean.
              auto stages = Spec::parse_pipeline(spec);
              ASSERT_TRUE(stages.ok());
              InputMatrix view(rows.data(), n, d);
              std::vector<Matrix> written;
              std::vector<std::size_t> first_non_finite;
              for (std::size_t k = 0; k + 1 < stages->size(); ++k) {
                auto pre = make_pre_aggregator((*stages)[k].to_string());
                ASSERT_TRUE(pre.ok());
                auto step = (*pre)->apply(view);
                ASSERT_TRUE(step.ok());
                if (k == 0) first_non_finite = step->non_finite;
                written.push_back(std::move(step->output));
                view = written.back().view();
              }
              auto want = Mean(MeanOptions{threads}).aggregate(view);
              ASSERT_EQ(got.ok(), want.ok());
              if (!want.ok()) continue;
              EXPECT_EQ(got->value, want->value);
              EXPECT_EQ(got->report.non_finite, first_non_finite);
              EXPECT_EQ(got->report.excluded, want->report.excluded);
            }
          }
        }
      }
    }
  });
}

// row_scales() is the contract the pipeline relies on: apply() writes exactly scales[i] · x_i
// (finite rows) and passes the non-finite ones unchanged; stages that do more give nullopt.
TEST(Pipeline, RowScalesAreWhatApplyWrites) {
  const std::size_t n = 9, d = 3000;  // several norm blocks: threads=20 splits the rows
  auto rows = testing::gaussian_rows(n, d, 77, 0.6);
  rows[4 * d + 7] = std::numeric_limits<float>::infinity();
  const InputMatrix inputs(rows.data(), n, d);
  for (const char* spec : {"clipping:tau=30", "clipping:tau=30,threads=20", "arc:f=3", "arc:f=2,threads=2"}) {
    auto stage = make_pre_aggregator(spec);
    ASSERT_TRUE(stage.ok());
    auto scales = (*stage)->row_scales(inputs);
    auto applied = (*stage)->apply(inputs);
    ASSERT_TRUE(scales.ok() && scales->has_value() && applied.ok()) << spec;
    const RowScales& factors = **scales;
    EXPECT_EQ(factors.non_finite, applied->non_finite) << spec;
    EXPECT_EQ(factors.non_finite, std::vector<std::size_t>{4}) << spec;
    std::size_t clipped = 0;
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(factors.scales[i] >= 0.0f && factors.scales[i] <= 1.0f) << spec;
      clipped += factors.scales[i] != 1.0f;
      for (std::size_t j = 0; j < d; ++j) {
        const float want = i == 4 ? rows[i * d + j] : factors.scales[i] * rows[i * d + j];
        ASSERT_EQ(applied->output.values[i * d + j], want) << spec << " row " << i << " column " << j;
      }
    }
    EXPECT_GT(clipped, 0u) << spec;
  }
  for (const char* spec : {"nnm:f=1", "bucketing:s=2"}) {
    auto stage = make_pre_aggregator(spec);
    ASSERT_TRUE(stage.ok());
    auto scales = (*stage)->row_scales(inputs);
    ASSERT_TRUE(scales.ok()) << spec;
    EXPECT_FALSE(scales->has_value()) << spec;
  }
  // The same checks as apply(): ARC's precondition.
  auto arc = make_pre_aggregator("arc:f=5");
  ASSERT_TRUE(arc.ok());
  EXPECT_EQ((*arc)->row_scales(inputs).error().code, ErrorCode::kPrecondition);
}

TEST(Pipeline, CheckFollowsTheNumberOfInputsThroughBucketing) {
  auto pipeline = make_aggregator("bucketing:s=2 > krum:f=1");
  ASSERT_TRUE(pipeline.ok());
  EXPECT_FALSE((*pipeline)->check(8).ok());  // 4 buckets < 2f + 3
  EXPECT_TRUE((*pipeline)->check(9).ok());   // 5 buckets
  std::vector<float> rows(8 * 3, 1.0f);
  auto result = (*pipeline)->aggregate(InputMatrix(rows.data(), 8, 3));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kPrecondition);
}

TEST(Pipeline, ListOfSpansOverload) {
  std::vector<std::vector<float>> rows{{1, 2}, {1, 3}, {100, 100}};
  std::vector<std::span<const float>> spans(rows.begin(), rows.end());
  auto rule = make_aggregator("clipping:tau=10 > median:f=1");
  ASSERT_TRUE(rule.ok());
  auto result = (*rule)->aggregate(std::span<const std::span<const float>>(spans));
  ASSERT_TRUE(result.ok());
  EXPECT_FLOAT_EQ(result->value[0], 1.0f);
  rows[1].push_back(4);
  std::vector<std::span<const float>> uneven(rows.begin(), rows.end());
  EXPECT_EQ((*rule)->aggregate(std::span<const std::span<const float>>(uneven)).error().code,
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ballot::robust
