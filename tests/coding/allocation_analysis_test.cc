#include "coding/allocation_analysis.h"

#include <gtest/gtest.h>

namespace ballot::coding {
namespace {

TEST(AllocationAnalysis, PaperCode) {
  const auto a = analyze(AllocationMatrix::paper_n5());
  EXPECT_EQ(a.ones, 19u);
  EXPECT_DOUBLE_EQ(a.redundancy, 3.8);
  EXPECT_EQ(a.row_degree, (std::vector<std::uint32_t>{1, 3, 5, 5, 5}));
  EXPECT_EQ(a.column_degree, (std::vector<std::uint32_t>{4, 4, 4, 4, 3}));
  EXPECT_EQ(a.min_column_degree, 3u);
  EXPECT_EQ(a.max_column_degree, 4u);
  EXPECT_EQ(a.full_rows, 3u);
  EXPECT_TRUE(a.empty_rows.empty());
  EXPECT_TRUE(a.empty_columns.empty());
  EXPECT_EQ(a.num_components, 1u);
  EXPECT_NE(a.summary().find("r = 3.80"), std::string::npos);
}

TEST(AllocationAnalysis, IdentityHasOneComponentPerNode) {
  const auto a = analyze(AllocationMatrix::identity(6));
  EXPECT_EQ(a.num_components, 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(a.component[i], a.component[6 + i]);
  EXPECT_EQ(a.component[0], 0u);
  EXPECT_EQ(a.component[5], 5u);
}

TEST(AllocationAnalysis, EmptyRowsAndColumnsAreIsolatedComponents) {
  // Node 0 holds partitions {0, 1}; node 1 holds nothing; node 2 holds {1}; partition 2 is lost.
  const auto g = AllocationMatrix::from_rows(3, {{0, 1}, {}, {1}}).value();
  const auto a = analyze(g);
  EXPECT_EQ(a.empty_rows, std::vector<std::uint32_t>{1});
  EXPECT_EQ(a.empty_columns, std::vector<std::uint32_t>{2});
  EXPECT_EQ(a.column_degree, (std::vector<std::uint32_t>{1, 2, 0}));
  EXPECT_EQ(a.num_components, 3u);  // {node0, node2, p0, p1}, {node1}, {p2}
  EXPECT_EQ(a.component[0], a.component[2]);
  EXPECT_NE(a.component[1], a.component[0]);
  EXPECT_NE(a.component[3 + 2], a.component[1]);
}

TEST(AllocationAnalysis, EmptyMatrix) {
  const auto a = analyze(AllocationMatrix(0));
  EXPECT_EQ(a.num_components, 0u);
  EXPECT_EQ(a.ones, 0u);
}

}  // namespace
}  // namespace ballot::coding
