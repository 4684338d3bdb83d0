#include "kernels/update.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/enforce.h"
#include "core/rng.h"
#include "kernels/detail/cpu_kernels.h"
#include "kernels/momentum.h"

namespace ballot::kernels {
namespace {

// Floats of every kind the steps meet: normal values over many scales, zeros of both signs,
// subnormals, infinities, NaN and the largest finite values.
std::vector<float> mixed_values(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) {
    switch (rng.uniform_int(16)) {
      case 0:
        v = rng.uniform_int(2) == 0 ? 0.0f : -0.0f;
        break;
      case 1:
        v = (rng.uniform_int(2) == 0 ? 1.0f : -1.0f) * std::numeric_limits<float>::denorm_min() *
            static_cast<float>(1 + rng.uniform_int(1000));
        break;
      case 2:
        v = rng.uniform_int(2) == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::max();
        break;
      case 3:
        v = std::numeric_limits<float>::quiet_NaN();
        break;
      default:
        v = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.uniform_int(40)) - 20));
    }
  }
  return values;
}

BitVector random_vote(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  BitVector vote(count);
  for (std::size_t i = 0; i < count; ++i) vote.set(i, rng.uniform_int(2) == 1);
  return vote;
}

// The same bits, or both NaN (a NaN's payload and sign may depend on which operand the compiler
// put first; no replica compares NaN parameters, a model holding one has diverged).
void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
        << what << ", coordinate " << i << ": " << got[i] << " against " << want[i];
  }
}

std::vector<const detail::CpuKernels*> tables_of_this_cpu() {
  std::vector<const detail::CpuKernels*> tables{&detail::kScalarKernels};
  if (isa_supported(Isa::kAvx2)) tables.push_back(detail::kAvx2Kernels);
  if (isa_supported(Isa::kAvx512)) tables.push_back(detail::kAvx512Kernels);
  return tables;
}

const SgdFactors kCases[] = {
    {1e-3f, 0.0f, 0.0f, 1.0f, false},   // the sign rule / plain SGD
    {1e-3f, 1e-4f, 0.0f, 1.0f, false},  // with weight decay
    {0.05f, 1e-4f, 0.9f, 1.0f, false},  // heavy ball
    {0.05f, 0.01f, 0.9f, 0.5f, true},   // Nesterov with dampening
};

// Each table's loops against update_logic.h's steps coordinate by coordinate: the vectors, the
// tails after the last whole 64 coordinates, unaligned spans, both directions, first and later
// steps.
TEST(UpdateKernelTables, EveryLevelGivesTheStepsBits) {
  for (const detail::CpuKernels* table : tables_of_this_cpu()) {
    const std::string level(isa_name(table->isa));
    for (std::size_t size : {0u, 1u, 15u, 63u, 64u, 65u, 127u, 200u, 1000u, 4099u}) {
      // One float past the start, so the vectors' loads are unaligned.
      const std::vector<float> x0 = mixed_values(size + 1, size + 1);
      const std::vector<float> buffer0 = mixed_values(size + 1, size + 2);
      const std::vector<float> direction = mixed_values(size + 1, size + 3);
      const BitVector vote = random_vote(size, size + 4);
      for (const SgdFactors& f : kCases) {
        for (bool use_vote : {true, false}) {
          for (bool first_step : {true, false}) {
            std::vector<float> x = x0, buffer = buffer0, want_x = x0, want_buffer = buffer0;
            for (std::size_t i = 0; i < size; ++i) {
              const float v = use_vote ? (vote.get(i) ? 1.0f : -1.0f) : direction[i + 1];
              if (f.momentum != 0.0f) {
                momentum_sgd_step(want_x[i + 1], want_buffer[i + 1], v, f, first_step);
              } else {
                want_x[i + 1] = decayed_step(want_x[i + 1], v, f.lr, f.weight_decay);
              }
            }
            table->update(x.data() + 1, f.momentum != 0.0f ? buffer.data() + 1 : nullptr,
                          use_vote ? nullptr : direction.data() + 1, use_vote ? vote.data() : nullptr, size, f,
                          first_step);
            const std::string what = level + ", d = " + std::to_string(size) + (use_vote ? ", vote" : ", fp32") +
                                     ", momentum " + std::to_string(f.momentum) + (first_step ? ", first" : "");
            expect_same_floats(x, want_x, what + " (params)");
            expect_same_floats(buffer, want_buffer, what + " (buffer)");
          }
        }
      }
    }
  }
}

TEST(UpdateKernelTables, EveryLevelGivesTheMomentumStepsBits) {
  for (const detail::CpuKernels* table : tables_of_this_cpu()) {
    for (std::size_t size : {0u, 1u, 63u, 64u, 65u, 1000u, 4099u}) {
      const std::vector<float> m0 = mixed_values(size + 1, 7 * size + 1);
      const std::vector<float> g = mixed_values(size + 1, 7 * size + 2);
      for (double beta : {0.0, 0.9, 0.99}) {
        const MomentumFactors f = momentum_factors(beta);
        std::vector<float> m = m0, want = m0;
        for (std::size_t i = 1; i <= size; ++i) want[i] = momentum_step(want[i], g[i], f.keep, f.mix);
        table->momentum(m.data() + 1, g.data() + 1, size, f.keep, f.mix);
        expect_same_floats(m, want, std::string(isa_name(table->isa)) + ", d = " + std::to_string(size));
      }
    }
  }
}

TEST(ApplyUpdate, TheSignRuleMovesEachCoordinateAgainstItsVote) {
  std::vector<float> x{1.0f, 1.0f, -2.0f};
  BitVector vote(3);
  vote.set(0, true);  // +1: x ← 1 − 0.5·(1 + 0.25·1) = 0.375
  apply_update(x, vote, {}, SgdFactors{0.5f, 0.25f}, false);
  // −1: 1 − 0.5·(−1 + 0.25) = 1.375; −2 − 0.5·(−1 − 0.5) = −1.25
  EXPECT_EQ(x, (std::vector<float>{0.375f, 1.375f, -1.25f}));
}

TEST(ApplyUpdate, HeavyBallStartsItsBufferAsTheDirection) {
  std::vector<float> x(100, 1.0f), buffer(100, 7.0f);
  const std::vector<float> direction(100, 2.0f);
  const SgdFactors f{0.5f, 0.0f, 0.5f, 1.0f, false};
  apply_update(x, direction, buffer, f, /*first_step=*/true);
  EXPECT_EQ(buffer, std::vector<float>(100, 2.0f));
  EXPECT_EQ(x, std::vector<float>(100, 0.0f));
  apply_update(x, direction, buffer, f, false);  // b = 0.5·2 + 2 = 3; x = 0 − 0.5·3
  EXPECT_EQ(buffer, std::vector<float>(100, 3.0f));
  EXPECT_EQ(x, std::vector<float>(100, -1.5f));
}

TEST(ApplyUpdate, SizesMustMatch) {
  std::vector<float> x(65), buffer(64);
  EXPECT_THROW(apply_update(x, BitVector(64), {}, SgdFactors{1.0f}, false), EnforceError);
  EXPECT_THROW(apply_update(x, std::vector<float>(66), {}, SgdFactors{1.0f}, false), EnforceError);
  // A momentum rule needs a buffer of the parameters' size; without momentum none is read.
  EXPECT_THROW(apply_update(x, BitVector(65), buffer, SgdFactors{1.0f, 0.0f, 0.9f}, false), EnforceError);
  EXPECT_NO_THROW(apply_update(x, BitVector(65), {}, SgdFactors{1.0f}, false));
}

}  // namespace
}  // namespace ballot::kernels
