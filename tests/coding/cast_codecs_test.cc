#include "coding/cast_codecs.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codec_test_util.h"
#include "coding/wire_format.h"
#include "kernels/isa.h"

namespace ballot::coding {
namespace {

TEST(CastCodecs, Fp16KnownValuesRoundToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);  // halfway to 2^16 rounds to even = inf
  EXPECT_EQ(float_to_fp16(1e9f), 0x7C00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie -> even (0)
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units -> 2
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  const std::uint16_t nan = float_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

#if defined(__FLT16_MAX__)
TEST(CastCodecs, Fp16MatchesTheCompilersConversionOnRandomFloats) {
  Rng rng(5);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns around the fp16 range, NaN excluded.
    const std::uint32_t exponent = 96 + static_cast<std::uint32_t>(rng.uniform_int(50));
    const std::uint32_t bits = (static_cast<std::uint32_t>(rng.uniform_int(2)) << 31) | (exponent << 23) |
                               static_cast<std::uint32_t>(rng.uniform_int(1u << 23));
    const float value = std::bit_cast<float>(bits);
    const _Float16 reference = static_cast<_Float16>(value);
    ASSERT_EQ(float_to_fp16(value), std::bit_cast<std::uint16_t>(reference)) << value;
  }
}
#endif

TEST(CastCodecs, Fp16AndBf16RoundTripEveryNonNanPattern) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const bool fp16_nan = (half & 0x7C00) == 0x7C00 && (half & 0x3FF) != 0;
    if (!fp16_nan)
      ASSERT_EQ(float_to_fp16(fp16_to_float(half)), half) << h;
    else
      ASSERT_TRUE(std::isnan(fp16_to_float(half)));
    const bool bf16_nan = (half & 0x7F80) == 0x7F80 && (half & 0x7F) != 0;
    if (!bf16_nan)
      ASSERT_EQ(float_to_bf16(bf16_to_float(half)), half) << h;
    else
      ASSERT_TRUE(std::isnan(bf16_to_float(half)));
  }
}

TEST(CastCodecs, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -9)), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(CastCodecs, DecodeIsTheRoundedValueAndSizeIsExact) {
  const auto layout = GradientLayout::whole(333);
  const auto g = testing::normal_values(333, 1);
  Rng rng(1);
  for (FloatFormat format : {FloatFormat::kFp32, FloatFormat::kFp16, FloatFormat::kBf16}) {
    CastCodec codec(format);
    const auto encoded = codec.encode(g, layout, rng);
    const std::size_t width = format == FloatFormat::kFp32 ? 4 : 2;
    EXPECT_EQ(encoded.size(), 24 + width * 333);
    const auto decoded = codec.decode(encoded.bytes, layout).value();
    for (std::size_t i = 0; i < g.size(); ++i) {
      const float expected = format == FloatFormat::kFp32   ? g[i]
                             : format == FloatFormat::kFp16 ? fp16_to_float(float_to_fp16(g[i]))
                                                            : bf16_to_float(float_to_bf16(g[i]));
      ASSERT_EQ(decoded[i], expected);
    }
  }
}

// The vector paths (at the AVX2 levels: F16C for fp16, integer operations for bf16) against the
// scalar reference: every sign, exponent and top ten mantissa bits with the low thirteen bits at
// and around the ties (bf16's ties among them); every 16-bit value of either format back.
TEST(CastCodecs, EveryIsaLevelEncodesAndDecodesTheScalarBits) {
  std::vector<float> x;
  for (std::uint32_t high = 0; high < (1u << 19); ++high) {
    for (const std::uint32_t low : {0x0u, 0x1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) {
      x.push_back(std::bit_cast<float>((high << 13) | low));
    }
  }
  const auto layout = GradientLayout::whole(x.size());
  // Every 16-bit value, as a message of either format.
  auto every_value = [](CodecId id) {
    std::vector<std::uint8_t> message;
    write_header(message, id, Granularity::kModel, 0, GradientLayout::whole(65536), 2 * 65536);
    for (std::uint32_t h = 0; h < 65536; ++h) {
      message.push_back(static_cast<std::uint8_t>(h));
      message.push_back(static_cast<std::uint8_t>(h >> 8));
    }
    return message;
  };
  const auto halves = every_value(CodecId::kFp16), bf16s = every_value(CodecId::kBf16);
  auto run = [&](FloatFormat format) {
    CastCodec codec(format);
    Rng rng(1);
    auto encoded = codec.encode(x, layout, rng).bytes;
    std::vector<float> decoded(65536, -0.0f);  // −0 + v is v, bit for bit
    EXPECT_TRUE(
        codec.decode_add(format == FloatFormat::kFp16 ? halves : bf16s, GradientLayout::whole(65536), decoded).ok());
    return std::pair{std::move(encoded), std::move(decoded)};
  };
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
  };
  for (const FloatFormat format : {FloatFormat::kFp16, FloatFormat::kBf16}) {
    const auto reference = [&] {
      kernels::ScopedIsaLimit scalar(kernels::Isa::kScalar);
      return run(format);
    }();
    for (std::size_t i = 0; i < x.size(); i += 97) {  // the reference is the scalar function
      const std::uint16_t want = format == FloatFormat::kFp16 ? float_to_fp16(x[i]) : float_to_bf16(x[i]);
      ASSERT_EQ(std::memcmp(reference.first.data() + kHeaderBytes + 2 * i, &want, 2), 0) << i;
    }
    for (const auto isa : kernels::supported_isas()) {
      kernels::ScopedIsaLimit cap(isa);
      const auto got = run(format);
      EXPECT_TRUE(got.first == reference.first) << kernels::isa_name(isa);
      EXPECT_TRUE(same_bits(got.second, reference.second)) << kernels::isa_name(isa);
    }
  }
  const auto decoded = run(FloatFormat::kFp16).second;  // at the best level
  const auto decoded_bf16 = run(FloatFormat::kBf16).second;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float want = fp16_to_float(static_cast<std::uint16_t>(h));
    ASSERT_EQ(std::memcmp(&decoded[h], &want, 4), 0) << h;
    // Decoding adds the values: a signalling NaN comes out quiet (the levels agree, checked above).
    const float want_bf16 = bf16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(want_bf16)) {
      ASSERT_TRUE(std::isnan(decoded_bf16[h])) << h;
    } else {
      ASSERT_EQ(std::memcmp(&decoded_bf16[h], &want_bf16, 4), 0) << h;
    }
  }
#if defined(__x86_64__)
  // With denormals flushed (FTZ) or zeroed (DAZ) the vector path is not taken: the same bytes.
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);
  const auto flushed = run(FloatFormat::kFp16).first;
  _mm_setcsr(csr);
  kernels::ScopedIsaLimit scalar(kernels::Isa::kScalar);
  EXPECT_TRUE(flushed == run(FloatFormat::kFp16).first);
#endif
}

}  // namespace
}  // namespace ballot::coding
