#include "coding/detail/uniform.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/isa.h"

namespace ballot::coding::detail {
namespace {

// The batched stream must be exactly what Rng::uniform_float() returns, at every ISA level,
// from any start (not only block-aligned) and for any length.
TEST(Uniform, BatchEqualsRngUniformFloatAtEveryIsaLevel) {
  for (auto isa : kernels::supported_isas()) {
    kernels::set_isa_limit(isa);
    for (std::uint64_t start : {0ull, 1ull, 3ull, 4ull, 1001ull, (1ull << 34) - 5}) {
      for (std::size_t count : {0u, 1u, 5u, 64u, 127u, 128u, 129u, 1000u, 5003u}) {
        Rng rng(0x1234567890ull, 42);
        rng.seek(start);
        std::vector<float> out(count);
        fill_uniform(rng.seed(), rng.stream(), start, out);
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[i], rng.uniform_float())
              << kernels::isa_name(isa) << " start " << start << " i " << i;
        }
      }
    }
  }
  kernels::set_isa_limit(kernels::Isa::kAvx512);
}

TEST(Uniform, BlockCounterCarryIsHandled) {
  // Blocks around 2^32, where the low counter word wraps inside a 16-block batch.
  const std::uint64_t start = 4 * ((1ull << 32) - 7);
  std::vector<float> out(4 * 32);
  fill_uniform(7, 9, start, out);
  Rng rng(7, 9);
  rng.seek(start);
  for (float v : out) ASSERT_EQ(v, rng.uniform_float());
}

TEST(Uniform, StreamWindowAdvancesTheRng) {
  Rng rng(3, 4);
  rng.seek(10);
  const UniformStream window(rng, 100);
  EXPECT_EQ(rng.position(), 110u);
  std::vector<float> out(2);
  window.fill(5, out);
  Rng check(3, 4);
  check.seek(15);
  EXPECT_EQ(out[0], check.uniform_float());
}

}  // namespace
}  // namespace ballot::coding::detail
