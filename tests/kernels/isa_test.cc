#include "kernels/isa.h"

#include <gtest/gtest.h>

namespace ballot::kernels {
namespace {

TEST(Isa, ScalarIsAlwaysSupportedAndLevelsAreOrdered) {
  const auto levels = supported_isas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), Isa::kScalar);
  for (std::size_t i = 1; i < levels.size(); ++i) EXPECT_LT(levels[i - 1], levels[i]);
  ScopedIsaLimit uncapped(Isa::kAvx512);
  EXPECT_EQ(active_isa(), levels.back());
}

TEST(Isa, LimitCapsTheActiveLevel) {
  const Isa before = isa_limit();
  {
    ScopedIsaLimit cap(Isa::kScalar);
    EXPECT_EQ(isa_limit(), Isa::kScalar);
    EXPECT_EQ(active_isa(), Isa::kScalar);
    {
      ScopedIsaLimit inner(Isa::kAvx2);
      EXPECT_LE(active_isa(), Isa::kAvx2);
    }
    EXPECT_EQ(active_isa(), Isa::kScalar);  // the inner scope restored the outer cap
    set_isa_limit(Isa::kAvx512);
    EXPECT_EQ(active_isa(), supported_isas().back());
  }
  EXPECT_EQ(isa_limit(), before);
}

TEST(Isa, ParsesTheNamesOfBallotIsa) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(parse_isa("AVX2"), std::nullopt);
  EXPECT_EQ(parse_isa(""), std::nullopt);
  EXPECT_EQ(parse_isa("sse4"), std::nullopt);
}

TEST(Isa, Names) {
  EXPECT_EQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_EQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace ballot::kernels
