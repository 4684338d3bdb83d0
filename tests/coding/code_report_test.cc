#include "coding/code_report.h"

#include <gtest/gtest.h>

namespace ballot::coding {
namespace {

bool contains(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

TEST(CodeReport, PaperCodeReportsBothPlacementsAndTheTable) {
  CodeReportOptions options;
  options.trials = 4096;
  const auto report = code_report("paper5", 5, options);
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  const std::string& text = report.value();
  EXPECT_TRUE(contains(text, "code paper5\n")) << text;
  EXPECT_TRUE(contains(text, "ones = 19, r = 3.800")) << text;
  EXPECT_TRUE(contains(text, "node  1 | . 1 1 1 . | 3")) << text;
  EXPECT_TRUE(contains(text, "exchange, every input in (a):")) << text;
  EXPECT_TRUE(contains(text, "b = 1\n    smallest breaking coalition:")) << text;
  EXPECT_TRUE(contains(text, "validity (b):")) << text;
  EXPECT_TRUE(contains(text, "structural guarantee")) << text;
  EXPECT_TRUE(contains(text, "attack reverse")) << text;
  // One table row per b in 0..2.
  EXPECT_TRUE(contains(text, "\n     0   ")) << text;
  EXPECT_TRUE(contains(text, "\n     2   ")) << text;
  EXPECT_FALSE(contains(text, "\n     3   ")) << text;
}

TEST(CodeReport, LargeCodesSkipTheExhaustiveCertificateButKeepTheBound) {
  CodeReportOptions options;
  options.trials = 640;
  options.byzantine_counts = {10};
  options.show_matrix = false;
  const auto report = code_report("deterministic:b=10", 41, options).value();
  EXPECT_TRUE(contains(report, "not certified")) << report;
  EXPECT_TRUE(contains(report, "b = 10 (21 full rows, 10 singleton/complement pairs)")) << report;
  EXPECT_FALSE(contains(report, "node  0 |")) << report;
}

TEST(CodeReport, PropagatesErrors) {
  EXPECT_FALSE(code_report("paper5", 7).ok());
  EXPECT_FALSE(code_report("bogus:", 7).ok());
  CodeReportOptions options;
  options.q = 2;
  EXPECT_FALSE(code_report(AllocationMatrix::identity(3), options).ok());
}

TEST(CodeReport, SearchReportComparesWithTheConstruction) {
  const auto report = code_search_report(7, 1).value();
  EXPECT_TRUE(contains(report, "29 ones, r = 4.143 (proven optimal)")) << report;
  EXPECT_TRUE(contains(report, "general construction: 33 ones, r = 4.714")) << report;
  EXPECT_FALSE(code_search_report(11, 1).ok());
}

}  // namespace
}  // namespace ballot::coding
