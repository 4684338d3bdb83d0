#include "learning/parameter_file.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/byte_io.h"

namespace ballot::learning {
namespace {

ParameterFile small_file() {
  ParameterFile file;
  file.tensors = {{"conv.weight", {2, 1, 2, 2}}, {"conv.bias", {2}}, {"scale", {}}};
  for (std::size_t i = 0; i < 11; ++i) file.values.push_back(0.25f * static_cast<float>(i) - 1.0f);
  file.values[3] = std::numeric_limits<float>::quiet_NaN();
  file.values[4] = -0.0f;
  return file;
}

// A file written field by field, so that every field can be wrong; sealed with a valid checksum
// unless told otherwise, so that the decoder reaches the field under test.
struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> dims;
  int rank = -1;  // -1: dims.size()
};
struct RawFile {
  std::string magic = "BALLOTP1";
  std::uint32_t version = 1;
  std::int64_t count = -1;  // -1: tensors.size()
  std::vector<RawTensor> tensors;
  std::int64_t elements = -1;  // -1: values.size()
  std::vector<float> values;
  bool seal = true;
};

std::vector<std::uint8_t> sha256(std::span<const std::uint8_t> bytes) {
  std::vector<std::uint8_t> digest(32);
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return digest;
}

std::vector<std::uint8_t> build(const RawFile& raw) {
  ByteWriter out;
  out.put_bytes({reinterpret_cast<const std::uint8_t*>(raw.magic.data()), raw.magic.size()});
  out.put(raw.version);
  out.put(static_cast<std::uint32_t>(raw.count < 0 ? raw.tensors.size() : raw.count));
  for (const auto& t : raw.tensors) {
    out.put(static_cast<std::uint16_t>(t.name.size()));
    out.put_bytes({reinterpret_cast<const std::uint8_t*>(t.name.data()), t.name.size()});
    out.put(static_cast<std::uint8_t>(t.rank < 0 ? t.dims.size() : t.rank));
    out.put_array(std::span<const std::uint64_t>(t.dims));
  }
  out.put(static_cast<std::uint64_t>(raw.elements < 0 ? raw.values.size() : raw.elements));
  out.put_array(std::span<const float>(raw.values));
  auto digest = sha256(out.bytes());
  if (!raw.seal) digest[0] ^= 1;
  out.put_bytes(digest);
  return out.take();
}

RawFile valid_raw() {
  RawFile raw;
  raw.tensors = {{"w", {2, 3}}, {"b", {3}}};
  raw.values.assign(9, 1.5f);
  return raw;
}

void expect_malformed(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  const auto decoded = decode_parameter_file(bytes);
  ASSERT_FALSE(decoded.ok()) << "accepted; expected an error about " << needle;
  EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  EXPECT_NE(decoded.error().message.find(needle), std::string::npos) << decoded.error().message;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(ParameterFile, RoundTripsNamesShapesAndBitExactValues) {
  const auto file = small_file();
  const auto bytes = encode_parameter_file(file);
  ASSERT_TRUE(bytes.ok()) << bytes.error().to_string();
  const auto decoded = decode_parameter_file(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  ASSERT_EQ(decoded->tensors.size(), 3u);
  EXPECT_EQ(decoded->tensors[0].name, "conv.weight");
  EXPECT_EQ(decoded->tensors[0].shape, (std::vector<std::uint64_t>{2, 1, 2, 2}));
  EXPECT_EQ(decoded->tensors[0].offset, 0u);
  EXPECT_EQ(decoded->tensors[0].size, 8u);
  EXPECT_EQ(decoded->tensors[1].offset, 8u);
  EXPECT_EQ(decoded->tensors[1].size, 2u);
  EXPECT_TRUE(decoded->tensors[2].shape.empty());
  EXPECT_EQ(decoded->tensors[2].offset, 10u);
  EXPECT_EQ(decoded->tensors[2].size, 1u);
  EXPECT_TRUE(bit_equal(decoded->values, file.values));
  // Re-encoding the decoded file gives the same bytes.
  EXPECT_EQ(encode_parameter_file(*decoded).value(), *bytes);
  // The builder above writes the format the same way.
  RawFile raw;
  for (const auto& t : file.tensors) raw.tensors.push_back({t.name, t.shape});
  raw.values = file.values;
  EXPECT_EQ(build(raw), *bytes);
}

TEST(ParameterFile, RejectsEveryMalformedField) {
  ASSERT_TRUE(decode_parameter_file(build(valid_raw())).ok());
  auto raw = valid_raw();
  raw.magic = "BALLOTP2";
  expect_malformed(build(raw), "magic");
  raw = valid_raw();
  raw.version = 2;
  expect_malformed(build(raw), "format version 2");
  raw = valid_raw();
  raw.tensors.clear();
  raw.values.clear();
  expect_malformed(build(raw), "tensor count 0");
  raw = valid_raw();
  raw.count = 65537;
  expect_malformed(build(raw), "tensor count 65537");
  raw = valid_raw();
  raw.count = 3;  // more records announced than present
  expect_malformed(build(raw), "tensor");
  raw = valid_raw();
  raw.tensors[1].name = "";
  expect_malformed(build(raw), "tensor 1: name length 0");
  raw = valid_raw();
  raw.tensors[1].name = std::string(1025, 'x');
  expect_malformed(build(raw), "name length 1025");
  raw = valid_raw();
  raw.tensors[1].name = "w";
  expect_malformed(build(raw), "tensor 1 ('w'): duplicate name");
  raw = valid_raw();
  raw.tensors[0].name = std::string("a\0b", 3);
  expect_malformed(build(raw), "NUL");
  raw = valid_raw();
  raw.tensors[0].dims = {1, 1, 1, 1, 1, 1, 1, 1, 6};
  expect_malformed(build(raw), "tensor 0 ('w'): rank 9");
  raw = valid_raw();
  raw.tensors[1].dims = {0};
  expect_malformed(build(raw), "tensor 1 ('b'): dim 0 is 0");
  raw = valid_raw();
  raw.tensors[1].dims = {(std::uint64_t{1} << 31) + 1};
  expect_malformed(build(raw), "dim 0 is 2147483649");
  raw = valid_raw();
  raw.tensors[0].dims = {std::uint64_t{1} << 31, 2};
  expect_malformed(build(raw), "more than 2^31 elements");
  raw = valid_raw();
  raw.elements = 10;
  expect_malformed(build(raw), "element count 10 differs");
  raw = valid_raw();
  raw.elements = 8;
  expect_malformed(build(raw), "element count 8 differs");
  raw = valid_raw();
  raw.tensors[0].rank = 8;  // claims dims that are not there: read as truncation, not allocation
  expect_malformed(build(raw), "tensor");
  raw = valid_raw();
  raw.seal = false;
  expect_malformed(build(raw), "checksum");
}

TEST(ParameterFile, HugeClaimsFailBeforeAllocating) {
  // A header claiming 2^31 elements over a file of a few bytes is truncation, not an 8 GiB vector.
  RawFile raw;
  raw.tensors = {{"big", {std::uint64_t{1} << 31}}};
  raw.elements = std::int64_t{1} << 31;
  expect_malformed(build(raw), "truncated while reading values");
  raw.count = 65536;
  expect_malformed(build(raw), "exceeds the file");
}

TEST(ParameterFile, EveryTruncationIsMalformed) {
  const auto bytes = encode_parameter_file(small_file()).value();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const auto decoded = decode_parameter_file(std::span<const std::uint8_t>(bytes).first(n));
    ASSERT_FALSE(decoded.ok()) << "accepted the first " << n << " bytes";
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed) << n;
  }
}

TEST(ParameterFile, EveryFlippedBitAndTrailingBytesAreMalformed) {
  const auto bytes = encode_parameter_file(small_file()).value();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto flipped = bytes;
    flipped[i] ^= 0x10;
    const auto decoded = decode_parameter_file(flipped);
    ASSERT_FALSE(decoded.ok()) << "accepted a flip at byte " << i;
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  }
  // A flipped value byte leaves the structure intact: only the checksum catches it.
  auto flipped = bytes;
  flipped[bytes.size() - 32 - 1] ^= 0x01;
  expect_malformed(flipped, "checksum");
  auto longer = bytes;
  longer.push_back(0);
  expect_malformed(longer, "1 trailing bytes");
}

TEST(ParameterFile, EncodeValidatesTheSameRules) {
  const auto expect_bad = [](const ParameterFile& file, const std::string& needle) {
    const auto bytes = encode_parameter_file(file);
    ASSERT_FALSE(bytes.ok()) << needle;
    EXPECT_EQ(bytes.error().code, ErrorCode::kMalformed);
    EXPECT_NE(bytes.error().message.find(needle), std::string::npos) << bytes.error().message;
  };
  expect_bad(ParameterFile{}, "tensor count 0");
  auto file = small_file();
  file.tensors[1].name = "conv.weight";
  expect_bad(file, "duplicate name");
  file = small_file();
  file.tensors[2].name = "";
  expect_bad(file, "name length 0");
  file = small_file();
  file.tensors[2].name = std::string("x\0", 2);
  expect_bad(file, "NUL");
  file = small_file();
  file.tensors[2].shape = std::vector<std::uint64_t>(9, 1);
  expect_bad(file, "rank 9");
  file = small_file();
  file.tensors[1].shape = {0};
  expect_bad(file, "dim 0 is 0");
  file = small_file();
  file.values.pop_back();
  expect_bad(file, "10 values for tensors of 11 elements");
}

TEST(ParameterFile, LayoutDigestCoversNamesAndShapesOnly) {
  auto a = small_file();
  auto b = small_file();
  for (auto& v : b.values) v += 1.0f;
  EXPECT_EQ(layout_digest(a.tensors), layout_digest(b.tensors));
  b.tensors[0].offset = 99;  // derived fields are not part of the layout
  EXPECT_EQ(layout_digest(a.tensors), layout_digest(b.tensors));
  b = small_file();
  b.tensors[0].shape = {2, 2, 1, 2};  // same element count, another shape
  EXPECT_NE(layout_digest(a.tensors), layout_digest(b.tensors));
  b = small_file();
  b.tensors[1].name = "conv.bias2";
  EXPECT_NE(layout_digest(a.tensors), layout_digest(b.tensors));
  b = small_file();
  std::swap(b.tensors[0], b.tensors[1]);
  EXPECT_NE(layout_digest(a.tensors), layout_digest(b.tensors));
  // It is the SHA-256 of the file's bytes from T through the last dims.
  const auto bytes = encode_parameter_file(a).value();
  const std::size_t header_end = bytes.size() - 32 - a.values.size() * sizeof(float) - 8;
  const auto expected = sha256(std::span<const std::uint8_t>(bytes).subspan(12, header_end - 12));
  const auto digest = layout_digest(a.tensors);
  EXPECT_EQ(std::vector<std::uint8_t>(digest.begin(), digest.end()), expected);
}

class ParameterFileOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_parameter_file_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ParameterFileOnDisk, WritesAtomicallyAndReadsBack) {
  const auto path = dir_ / "init.ballot";
  ASSERT_TRUE(write_parameter_file(path, small_file()).ok());
  for (const auto& entry : std::filesystem::directory_iterator(dir_))  // no temporary file stays
    EXPECT_EQ(entry.path().filename(), "init.ballot");
  const auto read = read_parameter_file(path);
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_TRUE(bit_equal(read->values, small_file().values));
  EXPECT_EQ(read->tensors.size(), 3u);
  // An invalid file is refused before anything is written.
  ParameterFile bad = small_file();
  bad.values.clear();
  EXPECT_FALSE(write_parameter_file(dir_ / "bad.ballot", bad).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.ballot"));
}

TEST_F(ParameterFileOnDisk, MissingAndCorruptFilesNameThePath) {
  const auto missing = read_parameter_file(dir_ / "nope.ballot");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nope.ballot"), std::string::npos);
  const auto path = dir_ / "corrupt.ballot";
  std::ofstream(path, std::ios::binary) << "BALLOTP1 and then nonsense";
  const auto corrupt = read_parameter_file(path);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, ErrorCode::kMalformed);
  EXPECT_NE(corrupt.error().message.find("corrupt.ballot"), std::string::npos);
}

}  // namespace
}  // namespace ballot::learning
