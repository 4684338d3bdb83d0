#include "coding/wire_format.h"

#include <gtest/gtest.h>

namespace ballot::coding {
namespace {

TEST(WireFormat, HeaderRoundTripsAndIsTwentyFourBytes) {
  const auto layout = GradientLayout::from_sizes({{"a", 10}, {"b", 5}}).value();
  std::vector<std::uint8_t> bytes;
  write_header(bytes, CodecId::kQsgd, Granularity::kLayer, 1, layout, 0);
  ASSERT_EQ(bytes.size(), kHeaderBytes);
  const auto header = read_header(bytes, CodecId::kQsgd, 1, layout);
  ASSERT_TRUE(header.ok()) << header.error().to_string();
  EXPECT_EQ(header->granularity, Granularity::kLayer);
  EXPECT_EQ(header->flags, 1);
  EXPECT_EQ(header->d, 15u);
  EXPECT_EQ(header->num_layers, 2u);
  EXPECT_EQ(header->layout_digest, layout_digest(layout));
}

TEST(WireFormat, HeaderChecksEachField) {
  const auto layout = GradientLayout::whole(100);
  std::vector<std::uint8_t> good;
  write_header(good, CodecId::kTopK, Granularity::kModel, 0, layout, 0);
  EXPECT_FALSE(read_header(good, CodecId::kSign, 0, layout).ok());  // other codec
  EXPECT_FALSE(read_header(good, CodecId::kTopK, 0, GradientLayout::whole(99)).ok());
  EXPECT_FALSE(read_header(std::span(good).first(23), CodecId::kTopK, 0, layout).ok());
  auto flagged = good;
  flagged[5] = 2;
  EXPECT_FALSE(read_header(flagged, CodecId::kTopK, 1, layout).ok());  // unknown flag
  auto granular = good;
  granular[4] = 2;
  EXPECT_FALSE(read_header(granular, CodecId::kTopK, 0, layout).ok());
  auto version = good;
  version[2] = kWireVersion + 1;
  const auto error = read_header(version, CodecId::kTopK, 0, layout);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.error().code, ErrorCode::kMalformed);
  EXPECT_NE(error.error().message.find("version"), std::string::npos);
}

TEST(WireFormat, LayoutDigestSeesTheSplitNotTheNames) {
  const auto a = GradientLayout::from_sizes({{"a", 10}, {"b", 5}}).value();
  const auto b = GradientLayout::from_sizes({{"x", 10}, {"y", 5}}).value();
  const auto c = GradientLayout::from_sizes({{"a", 5}, {"b", 10}}).value();
  EXPECT_EQ(layout_digest(a), layout_digest(b));
  EXPECT_NE(layout_digest(a), layout_digest(c));
}

TEST(WireFormat, SegmentsFollowTheGranularity) {
  const auto layout = GradientLayout::from_sizes({{"a", 10}, {"b", 5}}).value();
  const auto model = segments_of(layout, Granularity::kModel);
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model[0].size, 15u);
  const auto layers = segments_of(layout, Granularity::kLayer);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[1].offset, 10u);
  EXPECT_EQ(layers[1].size, 5u);
}

TEST(WireFormat, ByteReaderNeverReadsPastTheEnd) {
  const std::vector<std::uint8_t> bytes{1, 0, 0, 0, 2, 3};
  ByteReader reader(bytes, "test bytes");
  EXPECT_EQ(reader.read<std::uint32_t>("x").value(), 1u);
  EXPECT_FALSE(reader.read<std::uint32_t>("y").ok());
  EXPECT_FALSE(reader.take(SIZE_MAX / 2, 4, "huge").ok());  // no overflow in count * size
  EXPECT_FALSE(reader.expect_end().ok());
  EXPECT_EQ(reader.take(2, 1, "rest").value().size(), 2u);
  EXPECT_TRUE(reader.expect_end().ok());
}

TEST(WireFormat, StateBlobRoundTripsAndIsValidated) {
  const auto layout = GradientLayout::whole(3);
  const std::vector<float> memory{1.0f, -2.0f, 3.5f};
  const std::vector<std::uint8_t> inner{9, 8, 7};
  const auto blob = write_state(CodecId::kSignum, memory, inner);
  const auto view = read_state(blob, CodecId::kSignum, layout);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->memory, memory);
  EXPECT_EQ(std::vector<std::uint8_t>(view->inner.begin(), view->inner.end()), inner);
  EXPECT_FALSE(read_state(blob, CodecId::kSign, layout).ok());
  EXPECT_FALSE(read_state(blob, CodecId::kSignum, GradientLayout::whole(4)).ok());
  for (std::size_t length = 0; length < blob.size(); ++length) {
    EXPECT_FALSE(read_state(std::span(blob).first(length), CodecId::kSignum, layout).ok());
  }
  // An empty memory (no state yet) fits any layout.
  EXPECT_TRUE(read_state(write_state(CodecId::kSignum, {}), CodecId::kSignum, layout).ok());
}

}  // namespace
}  // namespace ballot::coding
