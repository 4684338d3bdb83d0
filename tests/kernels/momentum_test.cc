#include "kernels/momentum.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace ballot::kernels {
namespace {

TEST(MomentumFactors, ComputeOneMinusBetaInDouble) {
  const auto f = momentum_factors(0.9);
  EXPECT_EQ(f.keep, 0.9f);
  EXPECT_EQ(f.mix, 0.1f);         // float(1 − 0.9)
  EXPECT_NE(f.mix, 1.0f - 0.9f);  // 0.10000002f, the codec's former formula
  EXPECT_EQ(momentum_factors(0.0).mix, 1.0f);
  EXPECT_EQ(momentum_factors(0.0).keep, 0.0f);
}

TEST(SignumMomentum, MatchesTheFormulaCoordinateByCoordinate) {
  std::vector<float> m{0.0f, 1.0f, -2.0f, 0.5f};
  const std::vector<float> g{1.0f, -1.0f, 3.0f, std::numeric_limits<float>::infinity()};
  const std::vector<float> before = m;
  signum_momentum(m, g, 0.9);
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i], 0.9f * before[i] + 0.1f * g[i]) << i;
}

TEST(SignumMomentum, BetaZeroCopiesTheGradientAndEmptyIsANoOp) {
  std::vector<float> m{5.0f, -5.0f};
  signum_momentum(m, std::vector<float>{-1.5f, 2.5f}, 0.0);
  EXPECT_EQ(m, (std::vector<float>{-1.5f, 2.5f}));
  std::vector<float> empty;
  signum_momentum(empty, std::vector<float>{}, 0.9);
  EXPECT_TRUE(empty.empty());
}

TEST(SignumMomentum, SizesMustMatch) {
  std::vector<float> m(3);
  EXPECT_THROW(signum_momentum(m, std::vector<float>(2), 0.9), EnforceError);
}

}  // namespace
}  // namespace ballot::kernels
