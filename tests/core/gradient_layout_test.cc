#include "core/gradient_layout.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/enforce.h"

namespace ballot {
namespace {

TEST(GradientLayout, SegmentsAreContiguousAndCoverTheBuffer) {
  GradientLayout layout;
  EXPECT_EQ(layout.add_layer("conv1.weight", 10), 0u);
  EXPECT_EQ(layout.add_layer("conv1.bias", 2), 1u);
  EXPECT_EQ(layout.add_layer("fc.weight", 7), 2u);
  EXPECT_EQ(layout.total_size(), 19u);
  EXPECT_EQ(layout.layer(1).offset, 10u);
  EXPECT_EQ(layout.layer(2).offset, 12u);
  EXPECT_EQ(layout.find("fc.weight"), 2u);
  EXPECT_FALSE(layout.find("missing").has_value());

  std::vector<float> flat(19);
  std::iota(flat.begin(), flat.end(), 0.0f);
  auto bias = layout.slice(std::span<float>(flat), 1);
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0], 10.0f);
  bias[1] = -1.0f;
  EXPECT_EQ(flat[11], -1.0f);
}

TEST(GradientLayout, WholeIsOneSegment) {
  auto layout = GradientLayout::whole(42);
  EXPECT_EQ(layout.num_layers(), 1u);
  EXPECT_EQ(layout.layer(0).name, "model");
  EXPECT_EQ(layout.total_size(), 42u);
}

TEST(GradientLayout, FromSizesReportsBadInput) {
  auto ok = GradientLayout::from_sizes({{"a", 3}, {"b", 0}, {"c", 5}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->total_size(), 8u);
  auto duplicate = GradientLayout::from_sizes({{"a", 3}, {"a", 4}});
  ASSERT_FALSE(duplicate.ok());
  EXPECT_EQ(duplicate.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(duplicate.error().message.find("'a'"), std::string::npos);
  EXPECT_FALSE(GradientLayout::from_sizes({{"", 3}}).ok());
  EXPECT_FALSE(GradientLayout::from_sizes({{"a", SIZE_MAX}, {"b", 2}}).ok());
  // At most 2^56 coordinates, so that a codec's byte size of the layout cannot wrap.
  EXPECT_TRUE(GradientLayout::from_sizes({{"a", GradientLayout::kMaxSize - 1}, {"b", 1}}).ok());
  const auto too_large = GradientLayout::from_sizes({{"a", GradientLayout::kMaxSize}, {"b", 1}});
  ASSERT_FALSE(too_large.ok());
  EXPECT_NE(too_large.error().message.find("'b'"), std::string::npos) << too_large.error().to_string();
  EXPECT_FALSE(GradientLayout::from_sizes({{"a", std::size_t{1} << 63}}).ok());
}

TEST(GradientLayout, MisuseIsACallerBug) {
  GradientLayout layout;
  layout.add_layer("a", 3);
  EXPECT_THROW(layout.add_layer("a", 1), EnforceError);
  std::vector<float> wrong(4);
  EXPECT_THROW((void)layout.slice(std::span<float>(wrong), 0), EnforceError);
  EXPECT_THROW((void)layout.layer(1), EnforceError);
}

TEST(GradientLayout, Equality) {
  EXPECT_EQ(GradientLayout::whole(3), GradientLayout::whole(3));
  EXPECT_FALSE(GradientLayout::whole(3) == GradientLayout::whole(4));
}

}  // namespace
}  // namespace ballot
