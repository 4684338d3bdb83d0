// Test helpers for the CUDA coordinate-wise rules: inputs that stress what bit-identity depends on
// (ties, signed zeros, huge and wide-ranging values, non-finite rows), the CPU rule of each
// CoordinateRule, and a bitwise comparison of outputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "robust/coordinate_wise.h"
#include "robust/cuda/robust_cuda.h"

namespace ballot::robust::cuda::testing {

inline constexpr CoordinateRule kRules[] = {CoordinateRule::kMean, CoordinateRule::kMedian,
                                            CoordinateRule::kTrimmedMean, CoordinateRule::kMeanAroundMedian};

inline const char* rule_name(CoordinateRule rule) {
  switch (rule) {
    case CoordinateRule::kMean:
      return "mean";
    case CoordinateRule::kMedian:
      return "median";
    case CoordinateRule::kTrimmedMean:
      return "trimmed_mean";
    case CoordinateRule::kMeanAroundMedian:
      return "meamed";
  }
  return "?";
}

inline std::unique_ptr<Aggregator> cpu_rule(CoordinateRule rule, std::size_t f) {
  switch (rule) {
    case CoordinateRule::kMean:
      return std::make_unique<Mean>();
    case CoordinateRule::kMedian:
      return std::make_unique<CoordinateMedian>(MedianOptions{f, 1});
    case CoordinateRule::kTrimmedMean:
      return std::make_unique<TrimmedMean>(TrimmedMeanOptions{f, 1});
    case CoordinateRule::kMeanAroundMedian:
      return std::make_unique<MeanAroundMedian>(MeanAroundMedianOptions{f, 1});
  }
  return nullptr;
}

// The f values worth testing for n inputs: 0, about n/4 and the largest the rule allows.
inline std::vector<std::size_t> f_values(std::size_t n) {
  std::vector<std::size_t> out{0};
  if ((n - 1) / 4 > 0) out.push_back((n - 1) / 4);
  if ((n - 1) / 2 > (n - 1) / 4) out.push_back((n - 1) / 2);
  return out;
}

enum class Values {
  kGaussian,   // N(0, 1)
  kTies,       // small integers and both zeros: equal values at the middle ranks, MeaMed's tie path
  kExtreme,    // ±FLT_MAX and other huge values beside small ones: median − x overflows to ∞
  kWideRange,  // magnitudes 2^-60 … 2^60: double sums round, so their order matters
  kWideTies,   // a few such magnitudes, often equal: MeaMed's tie path with sums that round
  kTiny,       // subnormals and values near 2^-126: the CPU's ISA levels may differ in MeaMed
};
// The kinds whose results are the same at every ISA level.
inline constexpr Values kPortableValues[] = {Values::kGaussian, Values::kTies, Values::kExtreme, Values::kWideRange,
                                             Values::kWideTies};

// n rows of d floats, all finite, none below 2^-125 in magnitude except zeros (kTiny aside): halving
// them is exact, so the CPU's MeaMed median (low·0.5f + high·0.5f, contracted into one fused
// multiply-add at the AVX2 and AVX-512 levels) is the same at every ISA level.
inline std::vector<float> make_rows(std::size_t n, std::size_t d, Values kind, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(n * d);
  constexpr float kWide[] = {1.5e-18f, 3.25f, 7.1e14f, 12345.678f, 9.9e-9f, 2.0e7f};
  constexpr float kHuge[] = {std::numeric_limits<float>::max(), 3e38f, 1e38f, 1.0f, 0.0f, 1e-37f, 1e30f, 7.5f};
  for (auto& v : rows) {
    const float sign = rng.bernoulli(0.5) ? -1.0f : 1.0f;
    switch (kind) {
      case Values::kGaussian:
        v = static_cast<float>(rng.normal());
        break;
      case Values::kTies:
        v = sign * static_cast<float>(rng.uniform_int(4));  // includes −0.0
        break;
      case Values::kExtreme:
        v = sign * kHuge[rng.uniform_int(std::size(kHuge))];
        break;
      case Values::kWideRange:
        v = sign * std::ldexp(1.0f + rng.uniform_float(), static_cast<int>(rng.uniform_int(121)) - 60);
        break;
      case Values::kWideTies:
        v = sign * kWide[rng.uniform_int(std::size(kWide))];
        break;
      case Values::kTiny:
        v = sign *
            std::ldexp(static_cast<float>(1 + rng.uniform_int(64)), -149 + static_cast<int>(rng.uniform_int(24)));
        break;
    }
  }
  return rows;
}

// Puts a NaN, +Inf or −Inf at one or more random coordinates of `count` distinct random rows.
inline void spoil_rows(std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t count, std::uint64_t seed) {
  if (d == 0) return;
  Rng rng(seed);
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  rng.shuffle(std::span<std::size_t>(order));
  constexpr float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (std::size_t c = 0; c < count && c < n; ++c) {
    const std::size_t spots = 1 + rng.uniform_int(3);
    for (std::size_t s = 0; s < spots; ++s) rows[order[c] * d + rng.uniform_int(d)] = kBad[rng.uniform_int(3)];
  }
}

inline std::uint32_t bits_of(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Equal bit for bit; names the first coordinate that differs.
inline ::testing::AssertionResult same_bits(const std::vector<float>& actual, const std::vector<float>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "sizes " << actual.size() << " and " << expected.size();
  }
  for (std::size_t j = 0; j < actual.size(); ++j) {
    if (bits_of(actual[j]) != bits_of(expected[j])) {
      return ::testing::AssertionFailure()
             << "coordinate " << j << ": " << actual[j] << " (0x" << std::hex << bits_of(actual[j]) << ") instead of "
             << expected[j] << " (0x" << bits_of(expected[j]) << std::dec << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ballot::robust::cuda::testing
