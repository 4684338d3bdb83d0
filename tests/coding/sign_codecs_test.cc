#include "coding/sign_codecs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "codec_test_util.h"
#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/wire_format.h"
#include "kernels/momentum.h"

namespace ballot::coding {
namespace {

using testing::mixed_layout;
using testing::normal_values;

std::size_t words(std::size_t d) { return (d + 63) / 64; }

TEST(SignCodecs, SignDecodesToPlusMinusOneWithZeroPositive) {
  const auto layout = GradientLayout::whole(5);
  const std::vector<float> g{-1.5f, 0.0f, -0.0f, 2.0f, -1e-30f};
  SignCodec codec(SignKind::kSign);
  Rng rng(1);
  const auto encoded = codec.encode(g, layout, rng);
  EXPECT_EQ(encoded.size(), 24u + 8u);
  EXPECT_EQ(codec.decode(encoded.bytes, layout).value(), (std::vector<float>{-1.0f, 1.0f, 1.0f, 1.0f, -1.0f}));
}

TEST(SignCodecs, ScaledSignUsesTheL1MeanOfEachSegment) {
  const auto layout = mixed_layout();
  auto g = normal_values(layout.total_size(), 2);
  for (std::size_t i = 0; i < 70; ++i) g[i] *= 100.0f;  // one layer at a very different scale
  Rng rng(1);
  for (Granularity granularity : {Granularity::kModel, Granularity::kLayer}) {
    SignCodec codec(SignKind::kScaledSign, granularity);
    const auto encoded = codec.encode(g, layout, rng);
    const std::size_t segments = granularity == Granularity::kModel ? 1 : layout.num_layers();
    EXPECT_EQ(encoded.size(), 24 + 4 * segments + 8 * words(layout.total_size()));
    const auto decoded = codec.decode(encoded.bytes, layout).value();
    for (const auto& layer : layout.layers()) {
      const std::size_t begin = granularity == Granularity::kModel ? 0 : layer.offset;
      const std::size_t size = granularity == Granularity::kModel ? layout.total_size() : layer.size;
      double l1 = 0;
      for (std::size_t i = begin; i < begin + size; ++i) l1 += std::fabs(g[i]);
      const float scale = static_cast<float>(l1 / static_cast<double>(size));
      for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
        ASSERT_FLOAT_EQ(decoded[i], g[i] < 0 ? -scale : scale) << i;
      }
    }
  }
}

TEST(SignCodecs, LayerAndModelGranularityDifferWhereLayersDiffer) {
  const auto layout = mixed_layout();
  auto g = normal_values(layout.total_size(), 3);
  for (std::size_t i = 0; i < 70; ++i) g[i] *= 100.0f;
  Rng rng(1);
  SignCodec model(SignKind::kScaledSign, Granularity::kModel);
  SignCodec layer(SignKind::kScaledSign, Granularity::kLayer);
  const auto a = model.decode(model.encode(g, layout, rng).bytes, layout).value();
  const auto b = layer.decode(layer.encode(g, layout, rng).bytes, layout).value();
  // Per layer, the small layer keeps its own scale; the whole-model scale is dominated by the
  // big layer, so its error on the small layers is far larger.
  double err_model = 0, err_layer = 0;
  for (std::size_t i = 70; i < layout.total_size(); ++i) {
    err_model += std::pow(a[i] - g[i], 2);
    err_layer += std::pow(b[i] - g[i], 2);
  }
  EXPECT_GT(err_model, 100 * err_layer);
}

TEST(SignCodecs, OneBitReconstructsWithTheMeansOfEachSide) {
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 4);
  SignCodec codec(SignKind::kOneBit, Granularity::kLayer);
  Rng rng(1);
  const auto encoded = codec.encode(g, layout, rng);
  EXPECT_EQ(encoded.size(), 24 + 8 * layout.num_layers() + 8 * words(layout.total_size()));
  const auto decoded = codec.decode(encoded.bytes, layout).value();
  for (const auto& layer : layout.layers()) {
    double pos = 0, neg = 0;
    int np = 0, nn = 0;
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      if (g[i] < 0) {
        neg += g[i];
        ++nn;
      } else {
        pos += g[i];
        ++np;
      }
    }
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      const double expected = g[i] < 0 ? neg / nn : pos / np;
      ASSERT_NEAR(decoded[i], expected, 1e-5) << i;
    }
    // The reconstruction preserves each layer's sum (the point of using the means).
    double sum_g = 0, sum_d = 0;
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      sum_g += g[i];
      sum_d += decoded[i];
    }
    EXPECT_NEAR(sum_d, sum_g, 1e-4);
  }
}

// The device encoder reproduces these bits: each segment's sums of its two sides (x where x packs
// as bit 1, x where x < 0) in the chunked order of coding/detail/codec_logic.h, which the encoder
// feeds block piece by block piece, and its count of entries x < 0 (−0 is not one), for segments
// that straddle the encoder's blocks.
TEST(SignCodecs, OneBitScalesAreTheSegmentsChunkedSums) {
  const auto layout =
      GradientLayout::from_sizes({{"a", 5000}, {"b", 0}, {"c", 20000}, {"d", 1}, {"e", 4097}, {"f", 40}}).value();
  auto g = normal_values(layout.total_size(), 9);
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] *= std::ldexp(1.0f, static_cast<int>(i % 29) - 14);  // many binades: the order shows
    if (i % 17 == 3) g[i] = -0.0f;
  }
  for (std::size_t i = layout.layers()[5].offset; i < g.size(); ++i) g[i] = std::fabs(g[i]);  // no negative
  using Term = detail::ChunkedSum::Term;
  for (Granularity granularity : {Granularity::kLayer, Granularity::kModel}) {
    SignCodec codec(SignKind::kOneBit, granularity);
    Rng rng(1);
    const auto encoded = codec.encode(g, layout, rng);
    const auto segments = segments_of(layout, granularity);
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const float* x = g.data() + segments[s].offset;
      const std::size_t n = segments[s].size;
      std::size_t negatives = 0;
      for (std::size_t i = 0; i < n; ++i) negatives += x[i] < 0.0f ? 1 : 0;
      detail::ChunkedSum above(Term::kNonNegative), below(Term::kNegative);
      above.add(x, n);
      below.add(x, n);
      const auto expected = detail::onebit_scales(above.total(), below.total(), negatives, n);
      float positive, negative;
      std::memcpy(&positive, encoded.bytes.data() + kHeaderBytes + 8 * s, 4);
      std::memcpy(&negative, encoded.bytes.data() + kHeaderBytes + 8 * s + 4, 4);
      SCOPED_TRACE(::testing::Message() << "segment " << s << " of " << segments.size());
      EXPECT_EQ(std::bit_cast<std::uint32_t>(positive), std::bit_cast<std::uint32_t>(expected.positive));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(negative), std::bit_cast<std::uint32_t>(expected.negative));
      if (n == 40) {
        EXPECT_EQ(negative, 0.0f);  // no negative entry: 0, not 0/0
      }
    }
  }
}

// A non-finite entry spoils only the mean of its own side: an infinity makes its side's mean
// infinite and leaves the other side's exact; a NaN (bit 1) makes the non-negative side's mean the
// one quiet NaN pattern on the wire.
TEST(SignCodecs, OneBitKeepsANonFiniteEntryOnItsOwnSide) {
  const auto layout = GradientLayout::whole(4);
  SignCodec codec(SignKind::kOneBit, Granularity::kModel);
  Rng rng(1);
  const auto scales = [&](const std::vector<float>& g) {
    const auto encoded = codec.encode(g, layout, rng);
    std::uint32_t bits[2];
    std::memcpy(bits, encoded.bytes.data() + kHeaderBytes, 8);
    return std::pair{std::bit_cast<float>(bits[0]), bits[1]};
  };
  const float inf = std::numeric_limits<float>::infinity();
  auto [positive, negative_bits] = scales({0.5f, 0.25f, -1.0f, -inf});
  EXPECT_EQ(positive, 0.375f);
  EXPECT_EQ(std::bit_cast<float>(negative_bits), -inf);
  std::tie(positive, negative_bits) = scales({0.5f, inf, -1.0f, -2.0f});
  EXPECT_EQ(positive, inf);
  EXPECT_EQ(std::bit_cast<float>(negative_bits), -1.5f);
  std::tie(positive, negative_bits) = scales({0.5f, -std::numeric_limits<float>::quiet_NaN(), -1.0f, -2.0f});
  EXPECT_EQ(std::bit_cast<std::uint32_t>(positive), 0x7FC00000u);
  EXPECT_EQ(std::bit_cast<float>(negative_bits), -1.5f);
}

TEST(SignCodecs, SignumSendsTheSignOfTheMomentum) {
  const auto layout = GradientLayout::whole(3);
  SignumCodec codec(SignumOptions{0.5f});
  Rng rng(1);
  const std::vector<float> g1{1.0f, -1.0f, 1.0f}, g2{-3.0f, 0.5f, -0.5f};
  EXPECT_EQ(codec.decode(codec.encode(g1, layout, rng).bytes, layout).value(), (std::vector<float>{1.0f, -1.0f, 1.0f}));
  // m = 0.5 (0.5 g1) + 0.5 g2 = {-1.25, 0, 0}: the first flips, the zeros send +1.
  EXPECT_EQ(codec.decode(codec.encode(g2, layout, rng).bytes, layout).value(), (std::vector<float>{-1.0f, 1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(codec.momentum()[0], -1.25f);
  EXPECT_FLOAT_EQ(codec.momentum()[1], 0.0f);
}

// A NaN or infinite gradient entry is sent as +1 in its round, then forgotten: the momentum entry
// restarts at 0 (left at NaN it would send +1 for ever, whatever the later gradients say).
TEST(SignCodecs, SignumForgetsANonFiniteEntryAfterItsRound) {
  const auto layout = GradientLayout::whole(70);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    SignumCodec codec(SignumOptions{0.5});
    Rng rng(1);
    std::vector<float> g(70, -1.0f);
    g[17] = bad;
    const auto first = codec.decode(codec.encode(g, layout, rng).bytes, layout).value();
    EXPECT_EQ(first[17], std::isnan(bad) ? 1.0f : -1.0f);
    EXPECT_EQ(codec.momentum()[17], 0.0f);
    g[17] = -1.0f;
    const auto later = codec.decode(codec.encode(g, layout, rng).bytes, layout).value();
    EXPECT_EQ(later[17], -1.0f);
    EXPECT_EQ(later[16], -1.0f);
  }
}

// One momentum formula: the codec's momentum is kernels::signum_momentum at β given in double
// (the same bits as the training runtime's WorkerMomentum), across block boundaries.
TEST(SignCodecs, SignumMomentumIsTheKernelsFormula) {
  const auto layout = GradientLayout::whole(20000);
  SignumCodec codec(SignumOptions{0.9});
  Rng rng(1);
  std::vector<float> expected(layout.total_size(), 0.0f);
  for (std::uint64_t step = 0; step < 3; ++step) {
    const auto g = normal_values(layout.total_size(), 40 + step);
    codec.encode(g, layout, rng);
    kernels::signum_momentum(expected, g, 0.9);
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), codec.momentum().begin(), codec.momentum().end()));
  }
}

TEST(SignCodecs, NonZeroPaddingBitsAreMalformed) {
  const auto layout = GradientLayout::whole(5);
  SignCodec codec(SignKind::kSign);
  Rng rng(1);
  auto bytes = codec.encode(std::vector<float>(5, 1.0f), layout, rng).bytes;
  bytes.back() |= 0x80;  // bit 63 of the only word: padding
  std::vector<float> acc(5, 0.0f);
  const auto status = codec.decode_add(bytes, layout, acc);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("padding"), std::string::npos);
}

TEST(SignCodecs, LongGradientsCrossBlockBoundaries) {
  // Blocks of 8192 coordinates and layers straddling them.
  const auto layout = GradientLayout::from_sizes({{"a", 5000}, {"b", 20000}, {"c", 3}}).value();
  const auto g = normal_values(layout.total_size(), 5);
  SignCodec codec(SignKind::kScaledSign, Granularity::kLayer);
  Rng rng(1);
  const auto decoded = codec.decode(codec.encode(g, layout, rng).bytes, layout).value();
  for (std::size_t l = 0; l < layout.num_layers(); ++l) {
    const auto& layer = layout.layer(l);
    double l1 = 0;
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) l1 += std::fabs(g[i]);
    const float scale = static_cast<float>(l1 / layer.size);
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      ASSERT_FLOAT_EQ(decoded[i], g[i] < 0 ? -scale : scale) << i;
    }
  }
}

}  // namespace
}  // namespace ballot::coding
