#include "kernels/float_entries.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "isa_test_util.h"

namespace ballot::kernels {
namespace {

using FloatEntries = PerIsaTest;

std::vector<std::uint32_t> reference(const std::vector<float>& x) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::signbit(x[i]) || x[i] != 0.0f || std::isnan(x[i])) out.push_back(static_cast<std::uint32_t>(i));
  return out;
}

TEST_P(FloatEntries, EveryValueButPositiveZeroIsAnEntry) {
  const std::vector<float> x = {0.0f,
                                -0.0f,
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::denorm_min(),
                                -std::numeric_limits<float>::infinity(),
                                0.0f,
                                1.0f};
  std::vector<std::uint32_t> out = {99};  // appended to
  append_entries(x, out);
  EXPECT_EQ(out, (std::vector<std::uint32_t>{99, 1, 2, 3, 4, 6}));
  EXPECT_EQ(count_entries(x), 5u);
}

TEST_P(FloatEntries, MatchesAPlainLoopAtEverySizeAndDensity) {
  Rng rng(5);
  for (std::size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 8191, 8192, 8193, 20000}) {
    for (double density : {0.0, 0.01, 0.3, 1.0}) {
      std::vector<float> x(n, 0.0f);
      for (auto& v : x) {
        if (!rng.bernoulli(density)) continue;
        const double kind = rng.uniform_double();
        v = kind < 0.1    ? -0.0f
            : kind < 0.15 ? std::numeric_limits<float>::quiet_NaN()
                          : static_cast<float>(rng.normal());
      }
      std::vector<std::uint32_t> out;
      append_entries(x, out);
      EXPECT_EQ(out, reference(x)) << n << " " << density;
      EXPECT_EQ(count_entries(x), reference(x).size()) << n << " " << density;
      // From every offset, so that blocks start anywhere against the data's alignment.
      if (n > 3) {
        std::vector<std::uint32_t> shifted;
        append_entries(std::span<const float>(x).subspan(3), shifted);
        std::vector<float> tail(x.begin() + 3, x.end());
        EXPECT_EQ(shifted, reference(tail));
      }
    }
  }
}

BALLOT_INSTANTIATE_PER_ISA(FloatEntries);

}  // namespace
}  // namespace ballot::kernels
