#include "coding/detail/rounding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "kernels/isa.h"

namespace ballot::coding::detail {
namespace {

// Restores the ISA cap at the end of a test (the loops below move it with set_isa_limit).
struct IsaGuard {
  kernels::ScopedIsaLimit cap{kernels::isa_limit()};
};

std::vector<float> test_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed, 5);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  // Special values: zeros of both signs, exact levels, NaN, infinities, huge and subnormal.
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -0.5f,
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            1e30f,
                            -1e-40f,
                            0.25f};
  for (std::size_t j = 0; j < std::size(specials) && 37 * j < n; ++j) x[37 * j] = specials[j];
  return x;
}

bool bit(const std::vector<std::uint8_t>& stream, std::size_t i) { return (stream[i / 8] >> (i % 8)) & 1u; }

TEST(RoundingStream, WindowStartsAtTheNextBlockAndAdvancesTheRng) {
  Rng rng(3, 4);
  rng.seek(10);  // words 10, 11 finish block 2: the window starts at block 3
  const RoundingStream window(rng, 300);
  EXPECT_EQ(window.first_block, 3u);
  EXPECT_EQ(RoundingStream::blocks_for(300), 48u);  // 3 groups of 128
  EXPECT_EQ(rng.position(), 4u * (3 + 48));
  // Coordinate 128g + 16m + j: bits 16(m%2).. of word m/2 of block first + 16g + j.
  const std::uint64_t i = 128 * 2 + 16 * 5 + 9;
  const std::uint32_t word = philox_stream_word(3, 4, 4 * (3 + 16 * 2 + 9) + 2);
  EXPECT_EQ(window.bits(i), static_cast<std::uint16_t>(word >> 16));
}

// Every ISA level computes the bits the scalar definition gives, for arbitrary ranges (segment
// boundaries anywhere), at a block counter whose low word wraps inside a group.
class RoundingIsa : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(RoundingIsa, QsgdMatchesTheDefinitionAtEveryLevel) {
  IsaGuard guard;
  const std::size_t d = 1000;
  const auto x = test_values(d, 1);
  const RoundingStream random(0xABCDEF12345ull, 77, GetParam());
  const std::size_t bytes = 8 * ((d + 63) / 64);
  const struct {
    std::size_t lo, hi;
    float inv, s;
  } pieces[] = {{0, 333, 7.0f, 16.0f}, {333, 334, 3.0f, 16.0f}, {334, 640, 0.0f, 16.0f}, {640, d, 2.5f, 5.0f}};
  for (auto isa : kernels::supported_isas()) {
    kernels::set_isa_limit(isa);
    std::vector<std::uint8_t> signs(bytes, 0), planes(5 * bytes, 0);
    for (const auto& piece : pieces) {
      qsgd_quantize(random, x.data(), piece.lo, piece.hi, piece.inv, piece.s, signs.data(), planes.data(), bytes, 5);
    }
    for (const auto& piece : pieces) {
      std::vector<std::uint32_t> levels(piece.hi - piece.lo);
      qsgd_levels(random, x.data(), piece.lo, piece.hi, piece.inv, piece.s, levels.data());
      for (std::size_t i = piece.lo; i < piece.hi; ++i) {
        float r = std::fabs(x[i]) * piece.inv;
        r = r < piece.s ? r : piece.s;  // NaN -> s
        const float whole = std::floor(r);
        const double u = (random.bits(i) + 0.5) / 65536.0;
        const std::uint32_t expected = static_cast<std::uint32_t>(whole) + (u < double(r) - whole ? 1u : 0u);
        ASSERT_EQ(levels[i - piece.lo], expected) << i;
        ASSERT_EQ(bit(signs, i), !(x[i] < 0.0f)) << kernels::isa_name(isa) << " " << i;
        for (int p = 0; p < 5; ++p) {
          ASSERT_EQ(bit(std::vector<std::uint8_t>(planes.begin() + p * bytes, planes.begin() + (p + 1) * bytes), i),
                    ((expected >> p) & 1u) != 0)
              << kernels::isa_name(isa) << " i " << i << " plane " << p;
        }
      }
    }
    // Padding bits stay zero.
    for (std::size_t i = d; i < 8 * bytes; ++i) ASSERT_FALSE(bit(signs, i));
  }
}

TEST_P(RoundingIsa, TernGradMatchesTheDefinitionAtEveryLevel) {
  IsaGuard guard;
  const std::size_t d = 777;
  const auto x = test_values(d, 2);
  const RoundingStream random(99, 1234567, GetParam());
  const std::size_t bytes = 8 * ((d + 63) / 64);
  const struct {
    std::size_t lo, hi;
    float limit, inv;
    bool keep_all;
  } pieces[] = {{0, 100, std::numeric_limits<float>::infinity(), 0.3f, false},
                {100, 101, 1.5f, 0.6f, false},
                {101, 200, 0.0f, 0.0f, true},
                {200, d, 2.0f, 0.5f, false}};
  for (auto isa : kernels::supported_isas()) {
    kernels::set_isa_limit(isa);
    std::vector<std::uint8_t> signs(bytes, 0), keep(bytes, 0);
    for (const auto& piece : pieces) {
      terngrad_quantize(random, x.data(), piece.lo, piece.hi, piece.limit, piece.inv, piece.keep_all, signs.data(),
                        keep.data());
    }
    for (const auto& piece : pieces) {
      for (std::size_t i = piece.lo; i < piece.hi; ++i) {
        const float a = std::fabs(x[i]);
        const float clipped = a < piece.limit ? a : piece.limit;
        const double u = (random.bits(i) + 0.5) / 65536.0;
        const bool expected = piece.keep_all || u < double(clipped * piece.inv);
        ASSERT_EQ(bit(keep, i), expected) << kernels::isa_name(isa) << " " << i;
        ASSERT_EQ(bit(signs, i), !(x[i] < 0.0f)) << kernels::isa_name(isa) << " " << i;
      }
    }
    for (std::size_t i = d; i < 8 * bytes; ++i) ASSERT_FALSE(bit(keep, i));
  }
}

// The benchmark's probe of the random stream's cost folds the same Philox blocks at every level:
// per word, the XOR over the blocks behind coordinates [0, d), from the scalar definition.
TEST_P(RoundingIsa, FoldOfTheStreamIsTheSameAtEveryLevel) {
  IsaGuard guard;
  const RoundingStream random(0x5EEDull, 9, GetParam());
  for (const std::uint64_t d :
       {std::uint64_t{1}, std::uint64_t{128}, std::uint64_t{129}, std::uint64_t{300}, std::uint64_t{1000}}) {
    const std::uint64_t blocks = RoundingStream::blocks_for(d);
    std::uint32_t folded[4] = {};
    for (std::uint64_t b = 0; b < blocks; ++b) {
      for (std::uint64_t w = 0; w < 4; ++w) {
        folded[w] ^= philox_stream_word(random.seed, random.stream, 4 * (random.first_block + b) + w);
      }
    }
    const auto rotl16 = [](std::uint32_t w) { return (w << 16) | (w >> 16); };
    const std::uint64_t expected = (folded[0] ^ rotl16(folded[2])) | std::uint64_t{folded[1] ^ rotl16(folded[3])} << 32;
    for (auto isa : kernels::supported_isas()) {
      kernels::set_isa_limit(isa);
      EXPECT_EQ(fold_rounding_blocks(random, d), expected) << kernels::isa_name(isa) << " d = " << d;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FirstBlock, RoundingIsa, ::testing::Values(0ull, 5ull, (1ull << 32) - 20, (3ull << 32) - 7));

TEST(Rounding, RoundUpFrequencyIsTheFraction) {
  // Many coordinates with the same fraction p: the round-up rate is p up to 2^-17 (resolution)
  // plus sampling noise; tolerance 5 standard errors.
  const std::size_t n = 1 << 18;
  for (float p : {0.001f, 0.3f, 0.5f, 0.97f}) {
    std::vector<float> x(n, 2.0f + p);  // inv = 1, s = 16: r = 2 + p
    Rng rng(11, 12);
    const RoundingStream random(rng, n);
    std::vector<std::uint32_t> level(n);
    qsgd_levels(random, x.data(), 0, n, 1.0f, 16.0f, level.data());
    double ups = 0;
    for (auto l : level) {
      ASSERT_TRUE(l == 2 || l == 3);
      ups += l == 3;
    }
    const double fraction = double(2.0f + p) - 2.0;
    EXPECT_NEAR(ups / n, fraction, 5 * std::sqrt(fraction * (1 - fraction) / n) + 1.0 / 131072) << p;
  }
}

}  // namespace
}  // namespace ballot::coding::detail
