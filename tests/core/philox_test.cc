#include "core/philox.h"

#include <gtest/gtest.h>

namespace ballot {
namespace {

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, Random123KnownAnswers) {
  struct Vector {
    PhiloxBlock counter;
    std::uint32_t key0, key1;
    PhiloxBlock expected;
  };
  const Vector vectors[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const auto& v : vectors) {
    const PhiloxBlock out = philox4x32_10(v.counter, v.key0, v.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], v.expected.v[i]) << "word " << i;
  }
}

TEST(Philox, StreamWordIsBlockWordOfCounter) {
  const std::uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  const std::uint64_t block = 5;
  const PhiloxBlock expected =
      philox4x32_10({{5, 0, static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}},
                    static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(philox_stream_word(seed, stream, 4 * block + i), expected.v[i]);
}

TEST(Philox, UnitFloatIsInHalfOpenInterval) {
  EXPECT_EQ(philox_unit_float(0), 0.0f);
  EXPECT_LT(philox_unit_float(0xffffffffu), 1.0f);
  EXPECT_EQ(philox_unit_float(0x80000000u), 0.5f);
}

}  // namespace
}  // namespace ballot
