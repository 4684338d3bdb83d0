#include "kernels/isa.h"

#include <gtest/gtest.h>

namespace ballot::kernels {
namespace {

TEST(Isa, ScalarIsAlwaysSupportedAndLevelsAreOrdered) {
  const auto levels = supported_isas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), Isa::kScalar);
  for (std::size_t i = 1; i < levels.size(); ++i) EXPECT_LT(levels[i - 1], levels[i]);
  EXPECT_EQ(active_isa(), levels.back());
}

TEST(Isa, LimitCapsTheActiveLevel) {
  set_isa_limit(Isa::kScalar);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  set_isa_limit(Isa::kAvx2);
  EXPECT_LE(active_isa(), Isa::kAvx2);
  set_isa_limit(Isa::kAvx512);
  EXPECT_EQ(active_isa(), supported_isas().back());
}

TEST(Isa, Names) {
  EXPECT_EQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_EQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace ballot::kernels
