#include "kernels/sign_logic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ballot::kernels {
namespace {

TEST(SignLogic, SignBitRule) {
  EXPECT_TRUE(sign_bit(0.0f));
  EXPECT_TRUE(sign_bit(-0.0f));
  EXPECT_TRUE(sign_bit(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_TRUE(sign_bit(1e-40f));
  EXPECT_FALSE(sign_bit(-1e-40f));
  EXPECT_FALSE(sign_bit(-std::numeric_limits<float>::infinity()));
}

TEST(SignLogic, ThresholdIsHalfRoundedUp) {
  EXPECT_EQ(vote_threshold(0), 0u);
  EXPECT_EQ(vote_threshold(1), 1u);
  EXPECT_EQ(vote_threshold(4), 2u);  // 2 of 4 is a tie -> +1
  EXPECT_EQ(vote_threshold(5), 3u);
}

TEST(SignLogic, PlanesFor) {
  EXPECT_EQ(planes_for(0), 1);
  EXPECT_EQ(planes_for(1), 1);
  EXPECT_EQ(planes_for(2), 2);
  EXPECT_EQ(planes_for(15), 4);
  EXPECT_EQ(planes_for(16), 5);
  EXPECT_EQ(planes_for((std::uint64_t{1} << 32) - 1), 32);
}

// Each of the 64 bit positions is an independent counter: position k receives k ones.
TEST(SignLogic, BitslicedCountersCountEachPosition) {
  constexpr int kPlanes = 7;
  std::uint64_t planes[kPlanes] = {};
  for (int input = 0; input < 64; ++input) {
    std::uint64_t x = 0;
    for (int k = 0; k < 64; ++k) x |= static_cast<std::uint64_t>(input < k) << k;
    bitsliced_add(planes, kPlanes, 0, x);
  }
  for (std::uint64_t threshold = 0; threshold <= 64; ++threshold) {
    const std::uint64_t ge = bitsliced_greater_equal(planes, kPlanes, threshold);
    for (int k = 0; k < 64; ++k) {
      EXPECT_EQ((ge >> k) & 1u, static_cast<std::uint64_t>(k >= static_cast<int>(threshold)))
          << "threshold " << threshold << " position " << k;
    }
  }
}

TEST(SignLogic, AddingAtAHigherPlaneMultiplies) {
  std::uint64_t planes[4] = {};
  bitsliced_add(planes, 4, 2, std::uint64_t{1});  // +4 at position 0
  bitsliced_add(planes, 4, 0, std::uint64_t{1});  // +1
  EXPECT_EQ(bitsliced_greater_equal(planes, 4, 5), 1u);
  EXPECT_EQ(bitsliced_greater_equal(planes, 4, 6) & 1u, 0u);
}

}  // namespace
}  // namespace ballot::kernels
