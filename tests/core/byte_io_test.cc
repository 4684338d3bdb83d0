#include "core/byte_io.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace ballot {
namespace {

TEST(ByteIo, WriterAndReaderRoundTripLittleEndian) {
  ByteWriter writer;
  writer.put<std::uint16_t>(0x0102).put<std::uint64_t>(7).put(1.5f).put(-2.25);
  const std::vector<float> floats{1.0f, -0.0f, 3.0f};
  writer.put_array<float>(floats);
  const std::vector<std::uint8_t> raw{9, 8};
  writer.put_bytes(raw);
  const auto bytes = writer.take();
  ASSERT_EQ(bytes.size(), 2u + 8 + 4 + 8 + 12 + 2);
  EXPECT_EQ(bytes[0], 0x02);  // least significant byte first
  EXPECT_EQ(bytes[1], 0x01);

  ByteReader reader(bytes, "test record");
  EXPECT_EQ(reader.read<std::uint16_t>("a").value(), 0x0102);
  EXPECT_EQ(reader.read<std::uint64_t>("b").value(), 7u);
  EXPECT_EQ(reader.read<float>("c").value(), 1.5f);
  EXPECT_EQ(reader.read<double>("d").value(), -2.25);
  EXPECT_EQ(reader.read_array<float>(3, "e").value(), floats);
  EXPECT_EQ(reader.take_bytes(2, "f").value()[1], 8);
  EXPECT_TRUE(reader.expect_end().ok());
}

TEST(ByteIo, ReaderNeverReadsPastTheEndAndNamesTheField) {
  const std::vector<std::uint8_t> bytes{1, 0, 0, 0, 2, 3};
  ByteReader reader(bytes, "test record");
  EXPECT_EQ(reader.read<std::uint32_t>("x").value(), 1u);
  const auto past = reader.read<std::uint32_t>("the count");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, ErrorCode::kMalformed);
  EXPECT_NE(past.error().message.find("test record truncated while reading the count at byte 4"), std::string::npos)
      << past.error().message;
  // A count near SIZE_MAX is refused without overflowing count * size and without allocating.
  EXPECT_FALSE(reader.take(std::numeric_limits<std::size_t>::max() / 2, 4, "huge").ok());
  EXPECT_FALSE(reader.read_array<double>(std::numeric_limits<std::size_t>::max(), "huge").ok());
  const auto trailing = reader.expect_end();
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.error().message.find("2 trailing bytes after the test record"), std::string::npos);
  EXPECT_EQ(reader.take(2, 1, "rest").value().size(), 2u);
  EXPECT_TRUE(reader.expect_end().ok());
  EXPECT_EQ(reader.position(), bytes.size());
}

TEST(ByteIo, StartAndRest) {
  const std::vector<std::uint8_t> bytes{1, 2, 3, 4};
  ByteReader clamped(bytes, "test record", 99);
  EXPECT_EQ(clamped.remaining(), 0u);
  ByteReader reader(bytes, "test record", 1);
  EXPECT_EQ(reader.rest().size(), 3u);
  EXPECT_TRUE(reader.expect_end().ok());
  EXPECT_NE(reader.malformed("bad magic").message.find("test record: bad magic"), std::string::npos);
}

}  // namespace
}  // namespace ballot
