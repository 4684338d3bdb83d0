#include "robust/aggregator.h"

#include <gtest/gtest.h>

#include <span>
#include <vector>

namespace ballot::robust {
namespace {

TEST(InputMatrix, FromBuffer) {
  std::vector<float> data(12);
  auto view = InputMatrix::from_buffer(data, 3);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->n(), 3u);
  EXPECT_EQ(view->d(), 4u);
  EXPECT_EQ(view->row(2), data.data() + 8);
  EXPECT_EQ(view->uniform_stride(), 4u);
  auto bad = InputMatrix::from_buffer(data, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(InputMatrix::from_buffer(data, 0).ok());
}

TEST(InputMatrix, FromRowsChecksSizes) {
  std::vector<std::vector<float>> rows{{1, 2}, {3, 4}, {5}};
  auto bad = InputMatrix::from_rows(rows);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("input 2"), std::string::npos) << bad.error().message;
  rows[2].push_back(6);
  auto good = InputMatrix::from_rows(rows);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->row_span(1)[1], 4.0f);
}

TEST(InputMatrix, SubsetAndStride) {
  std::vector<float> data(20);
  const InputMatrix view(data.data(), 5, 4);
  const std::vector<std::size_t> pick{1, 3, 4};
  const auto sub = view.subset(pick);
  EXPECT_EQ(sub.n(), 3u);
  EXPECT_EQ(sub.row(1), data.data() + 12);
  EXPECT_EQ(sub.uniform_stride(), 0u);  // rows 1, 3, 4 are not equally spaced
  const std::vector<std::size_t> even{0, 2, 4};
  EXPECT_EQ(view.subset(even).uniform_stride(), 8u);
}

}  // namespace
}  // namespace ballot::robust
