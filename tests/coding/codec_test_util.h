// Helpers shared by the codec tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "coding/codec.h"
#include "coding/codec_registry.h"
#include "core/gradient_layout.h"
#include "core/rng.h"

namespace ballot::coding::testing {

inline std::vector<float> normal_values(std::size_t count, std::uint64_t seed) {
  Rng rng(seed, 77);
  std::vector<float> values(count);
  for (auto& v : values) v = static_cast<float>(rng.normal());
  return values;
}

// Layers of different sizes, one of them empty and one not a multiple of 64.
inline GradientLayout mixed_layout() {
  return GradientLayout::from_sizes({{"conv", 70}, {"empty", 0}, {"fc", 129}, {"bias", 64}, {"out", 3}}).value();
}

inline std::unique_ptr<Codec> codec(const std::string& spec) {
  auto made = make_codec(spec);
  EXPECT_TRUE(made.ok()) << spec << ": " << (made.ok() ? "" : made.error().to_string());
  return std::move(made).value();
}

}  // namespace ballot::coding::testing
