#include "kernels/update_logic.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ballot::kernels {
namespace {

// a·b + c where a fused multiply-add and two roundings differ: a·b = 1 + 2^-11 + 2^-24 rounds to
// 1 + 2^-11 (a tie, to even), so the rounded sum is 0 while a fused one is 2^-24.
constexpr float kA = 1.0f + 0x1p-12f;
constexpr float kC = -(1.0f + 0x1p-11f);

TEST(UpdateLogic, EveryOperationIsRoundedSeparately) {
  EXPECT_EQ(std::fma(kA, kA, kC), 0x1p-24f);  // what a contracted build would give
  EXPECT_EQ(momentum_step(kA, kC, kA, 1.0f), 0.0f);
  EXPECT_EQ(add_rn(mul_rn(kA, kA), kC), 0.0f);
}

#if defined(__x86_64__) && defined(__GNUC__)
// Compiled for a CPU with FMA, where GCC fuses a·b + c into one rounding unless the build says
// -ffp-contract=off (every Ballot target does: cmake/BallotTargets.cmake). Either product may be
// the one fused, so both orders are checked.
__attribute__((target("fma"))) float momentum_step_where_fma_exists(float m, float g, float keep, float mix) {
  return momentum_step(m, g, keep, mix);
}
__attribute__((target("fma"))) float decayed_step_where_fma_exists(float x, float v, float lr, float weight_decay) {
  return decayed_step(x, v, lr, weight_decay);
}

TEST(UpdateLogic, NothingIsFusedWhereTheCpuHasFma) {
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no fused multiply-add";
  volatile float a = kA, c = kC, one = 1.0f, zero = 0.0f;  // not folded at compile time
  EXPECT_EQ(momentum_step_where_fma_exists(a, c, a, one), 0.0f);
  EXPECT_EQ(momentum_step_where_fma_exists(c, a, one, a), 0.0f);
  // x − η(v + λx) with v + λx = kA·kA + kC (λ = x = kA, v = kC) and η = 2^24: rounded twice,
  // v + λx = 0 and x stays; fused, it is 2^-24 and x − η·2^-24 = kA − 1 = 2^-12.
  volatile float big = 0x1p24f;
  EXPECT_EQ(decayed_step_where_fma_exists(a, c, big, a), kA);
  EXPECT_EQ(decayed_step_where_fma_exists(a, c, one, zero), kA - kC);
}
#endif

TEST(UpdateLogic, MomentumStepIsSignumsFormula) {
  EXPECT_EQ(momentum_step(2.0f, 4.0f, 0.5f, 0.25f), 2.0f);  // 0.5·2 + 0.25·4
  EXPECT_EQ(momentum_step(0.0f, -3.0f, 0.9f, 0.1f), 0.1f * -3.0f);
}

TEST(UpdateLogic, DecayedStepIsTheSignRule) {
  // x − η(v + λx) = 1 − 0.5·(−1 + 0.25·1) = 1.375
  EXPECT_EQ(decayed_step(1.0f, -1.0f, 0.5f, 0.25f), 1.375f);
  EXPECT_EQ(decayed_step(1.0f, 1.0f, 0.5f, 0.0f), 0.5f);
}

TEST(UpdateLogic, MomentumSgdFollowsPytorch) {
  const SgdFactors f{0.5f, 0.0f, 0.5f, 1.0f, false};
  float x = 1.0f, buffer = 123.0f;
  momentum_sgd_step(x, buffer, 2.0f, f, /*first_step=*/true);  // the buffer starts as the direction
  EXPECT_EQ(buffer, 2.0f);
  EXPECT_EQ(x, 0.0f);
  momentum_sgd_step(x, buffer, 2.0f, f, false);  // b = 0.5·2 + 2 = 3; x = 0 − 0.5·3
  EXPECT_EQ(buffer, 3.0f);
  EXPECT_EQ(x, -1.5f);

  const SgdFactors nesterov{0.5f, 0.5f, 0.5f, 0.5f, true};
  x = 2.0f;
  buffer = 1.0f;
  // d = 1 + 0.5·2 = 2; b = 0.5·1 + 0.5·2 = 1.5; x = 2 − 0.5·(2 + 0.5·1.5) = 0.625
  momentum_sgd_step(x, buffer, 1.0f, nesterov, false);
  EXPECT_EQ(buffer, 1.5f);
  EXPECT_EQ(x, 0.625f);
}

}  // namespace
}  // namespace ballot::kernels
