#include "core/bit_vector.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "core/enforce.h"

namespace ballot {
namespace {

TEST(BitVector, SizesAndWords) {
  for (std::size_t size : {0u, 1u, 63u, 64u, 65u, 1000u}) {
    BitVector bits(size);
    EXPECT_EQ(bits.size(), size);
    EXPECT_EQ(bits.num_words(), (size + 63) / 64);
    EXPECT_EQ(bits.count_ones(), 0u);
    EXPECT_TRUE(bits.padding_is_clear());
  }
}

TEST(BitVector, BitKOfWordWIsCoordinate64WPlusK) {
  BitVector bits(130);
  bits.set(0, true);
  bits.set(64 + 5, true);
  bits.set(129, true);
  EXPECT_EQ(bits.words()[0], 1u);
  EXPECT_EQ(bits.words()[1], std::uint64_t{1} << 5);
  EXPECT_EQ(bits.words()[2], std::uint64_t{1} << 1);
  EXPECT_EQ(bits.sign(69), 1);
  EXPECT_EQ(bits.sign(68), -1);
}

TEST(BitVector, FilledWithOnesKeepsPaddingZero) {
  BitVector bits(65, true);
  EXPECT_EQ(bits.count_ones(), 65u);
  EXPECT_EQ(bits.words()[1], 1u);
  bits.flip();
  EXPECT_EQ(bits.count_ones(), 0u);
  bits.flip();
  EXPECT_TRUE(bits.padding_is_clear());
  EXPECT_EQ(bits.last_word_mask(), 1u);
}

TEST(BitVector, ResizeGrowsWithValueAndShrinksClearingPadding) {
  BitVector bits(3, true);
  bits.resize(70, true);
  EXPECT_EQ(bits.count_ones(), 70u);
  bits.resize(66, false);
  EXPECT_EQ(bits.count_ones(), 66u);
  EXPECT_TRUE(bits.padding_is_clear());
  bits.resize(80, false);
  EXPECT_EQ(bits.count_ones(), 66u);
  EXPECT_FALSE(bits.get(70));
}

TEST(BitVector, FromWordsValidatesPeerInput) {
  std::vector<std::uint64_t> words{~std::uint64_t{0}, 1};
  auto ok = BitVector::from_words(65, words);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->count_ones(), 65u);

  auto wrong_count = BitVector::from_words(200, words);
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_EQ(wrong_count.error().code, ErrorCode::kMalformed);

  // The same from the words' bytes at any alignment.
  std::vector<std::uint8_t> bytes(1 + 16);
  std::memcpy(bytes.data() + 1, words.data(), 16);
  auto unaligned = BitVector::from_bytes(65, std::span<const std::uint8_t>(bytes).subspan(1));
  ASSERT_TRUE(unaligned.ok());
  EXPECT_EQ(*unaligned, *ok);
  EXPECT_EQ(BitVector::from_bytes(65, std::span<const std::uint8_t>(bytes).subspan(1, 15)).error().code,
            ErrorCode::kMalformed);  // not whole words
  EXPECT_EQ(BitVector::from_bytes(200, std::span<const std::uint8_t>(bytes).subspan(1)).error().code,
            ErrorCode::kMalformed);  // too few
  EXPECT_TRUE(BitVector::from_bytes(0, {}).ok());
  // A size near the top of size_t needs about 2^58 words, not 0 (bits + 63 would wrap).
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  static_assert(BitVector::words_for(kMax) == kMax / 64 + 1 && BitVector::words_for(kMax - 62) == kMax / 64 + 1);
  static_assert(BitVector::words_for(kMax - kMax % 64) == kMax / 64 && BitVector::words_for(64) == 1);
  EXPECT_EQ(BitVector::from_words(kMax, {}).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(BitVector::from_bytes(kMax - 40, {}).error().code, ErrorCode::kMalformed);

  words[1] = 3;  // bit 65 is padding for a 65-coordinate vector
  auto padding = BitVector::from_words(65, words);
  ASSERT_FALSE(padding.ok());
  EXPECT_EQ(padding.error().code, ErrorCode::kMalformed);
  std::memcpy(bytes.data() + 1, words.data(), 16);
  EXPECT_EQ(BitVector::from_bytes(65, std::span<const std::uint8_t>(bytes).subspan(1)).error().code,
            ErrorCode::kMalformed);
}

TEST(BitVector, EqualityComparesSizeAndBits) {
  BitVector a(10), b(10), c(11);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  b.set(3, true);
  EXPECT_FALSE(a == b);
}

TEST(BitVector, OutOfRangeAccessIsACallerBug) {
  BitVector bits(5);
  EXPECT_THROW((void)bits.get(5), EnforceError);
  EXPECT_THROW(bits.set(5, true), EnforceError);
}

TEST(BitVector, StorageIsCacheLineAligned) {
  BitVector bits(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bits.data()) % 64, 0u);
}

}  // namespace
}  // namespace ballot
