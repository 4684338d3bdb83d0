#include "coding/quantizers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "codec_test_util.h"
#include "coding/wire_format.h"
#include "kernels/isa.h"

namespace ballot::coding {
namespace {

using testing::normal_values;

std::size_t words(std::size_t d) { return (d + 63) / 64; }

// Mean and mean squared error of decode(encode(v)) over `trials` independent streams.
struct Moments {
  std::vector<double> mean;
  std::vector<double> sq;  // per coordinate mean squared error
  double mse = 0;
  double mse_of(std::size_t begin, std::size_t end) const {
    double total = 0;
    for (std::size_t i = begin; i < end; ++i) total += sq[i];
    return total;
  }
};
Moments moments(Codec& codec, const std::vector<float>& v, const GradientLayout& layout, int trials) {
  Moments m;
  m.mean.assign(v.size(), 0.0);
  m.sq.assign(v.size(), 0.0);
  std::vector<float> out(v.size());
  for (int t = 0; t < trials; ++t) {
    Rng rng(4242, static_cast<std::uint64_t>(t));
    std::fill(out.begin(), out.end(), 0.0f);
    EXPECT_TRUE(codec.decode_add(codec.encode(v, layout, rng).bytes, layout, out).ok());
    for (std::size_t i = 0; i < v.size(); ++i) {
      m.mean[i] += out[i];
      const double e = (out[i] - static_cast<double>(v[i])) * (out[i] - static_cast<double>(v[i]));
      m.sq[i] += e;
      m.mse += e;
    }
  }
  for (auto& x : m.mean) x /= trials;
  for (auto& x : m.sq) x /= trials;
  m.mse /= trials;
  return m;
}

double norm2(const std::vector<float>& v, std::size_t begin, std::size_t end) {
  double s = 0;
  for (std::size_t i = begin; i < end; ++i) s += static_cast<double>(v[i]) * v[i];
  return std::sqrt(s);
}

class QsgdLevels : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(QsgdLevels, IsUnbiased) {
  // Per coordinate Q_s(v_i) takes the two levels around |v_i| s/‖v‖ with variance at most
  // (‖v‖/s)²/4. Tolerance: 5 standard errors of the mean over 20000 fixed-seed trials.
  const std::uint32_t s = GetParam();
  const auto layout = GradientLayout::whole(64);
  const auto v = normal_values(64, s);
  QsgdCodec codec(QsgdOptions{.s = s});
  constexpr int kTrials = 20000;
  const auto m = moments(codec, v, layout, kTrials);
  const double sigma = norm2(v, 0, 64) / s / 2;
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(m.mean[i], v[i], 5 * sigma / std::sqrt(kTrials)) << "s=" << s << " i=" << i;
  }
}

TEST_P(QsgdLevels, VarianceIsTheExactValueAndWithinTheBound) {
  // E‖Q_s(v) - v‖² = Σ (‖v‖/s)² p_i (1 - p_i), p_i the fractional part of |v_i| s/‖v‖, and
  // Alistarh et al. (Lemma 3.1) bound it by min(d/s², √d/s) ‖v‖².
  const std::uint32_t s = GetParam();
  const std::size_t d = 256;
  const auto layout = GradientLayout::whole(d);
  const auto v = normal_values(d, 100 + s);
  QsgdCodec codec(QsgdOptions{.s = s});
  const double norm = norm2(v, 0, d);
  double exact = 0;
  for (float x : v) {
    const double r = std::fabs(x) * s / norm;
    const double p = r - std::floor(r);
    exact += (norm / s) * (norm / s) * p * (1 - p);
  }
  const auto m = moments(codec, v, layout, 4000);
  EXPECT_NEAR(m.mse, exact, 0.1 * exact) << "s=" << s;
  const double bound = std::min(d / double(s * s), std::sqrt(double(d)) / s) * norm * norm;
  EXPECT_LE(m.mse, bound);
}

INSTANTIATE_TEST_SUITE_P(Levels, QsgdLevels, ::testing::Values(1u, 2u, 4u, 16u, 255u));

TEST(Qsgd, LevelsAreMultiplesOfNormOverSAndSizesAreExact) {
  const auto layout = testing::mixed_layout();
  const auto v = normal_values(layout.total_size(), 3);
  for (std::uint32_t s : {1u, 5u, 16u}) {
    QsgdCodec codec(QsgdOptions{.s = s, .elias = false, .granularity = Granularity::kLayer});
    Rng rng(1);
    const auto encoded = codec.encode(v, layout, rng);
    const std::size_t planes = std::bit_width(s);
    EXPECT_EQ(encoded.size(), 24 + 4 + 4 * layout.num_layers() + 8 * (1 + planes) * words(layout.total_size()));
    const auto decoded = codec.decode(encoded.bytes, layout).value();
    for (const auto& layer : layout.layers()) {
      const double unit = norm2(v, layer.offset, layer.offset + layer.size) / s;
      for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
        const double level = std::fabs(decoded[i]) / unit;
        EXPECT_NEAR(level, std::round(level), 1e-3);
        EXPECT_LE(std::round(level), s);
        // Only the two levels around the true value are possible.
        EXPECT_LE(std::fabs(decoded[i] - v[i]), unit * (1 + 1e-5));
        if (decoded[i] != 0) {
          EXPECT_EQ(decoded[i] < 0, v[i] < 0);
        }
      }
    }
  }
}

TEST(Qsgd, EliasCodingCarriesTheSameLevelsInFewerBits) {
  const auto layout = GradientLayout::whole(4000);
  const auto v = normal_values(4000, 4);
  QsgdCodec fixed(QsgdOptions{.s = 4});
  QsgdCodec elias(QsgdOptions{.s = 4, .elias = true});
  Rng a(7), b(7);
  const auto f = fixed.encode(v, layout, a);
  const auto e = elias.encode(v, layout, b);
  EXPECT_EQ(fixed.decode(f.bytes, layout).value(), elias.decode(e.bytes, layout).value());
  EXPECT_LT(e.size(), f.size());
  EXPECT_LE(e.size(), elias.wire_size(layout));
  EXPECT_FALSE(elias.exact_wire_size());
}

// The Elias stream is transcoded into level planes for decoding; a stream with fewer bits than
// coordinates (every code has at least one) is refused before the planes are allocated.
TEST(Qsgd, AnEliasStreamShorterThanItsCoordinatesIsMalformed) {
  const std::size_t d = 1000;
  const auto layout = GradientLayout::whole(d);
  QsgdCodec codec(QsgdOptions{.s = 4, .elias = true});
  Rng rng(2);
  const auto good = codec.encode(normal_values(d, 2), layout, rng).bytes;
  // Header, s, one norm, then a bit count of 0 and no words.
  std::vector<std::uint8_t> empty(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + 8));
  empty.resize(empty.size() + 8, 0);
  std::vector<float> acc(d, 1.0f);
  const Status status = codec.decode_add(empty, layout, acc);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kMalformed);
  EXPECT_NE(status.error().message.find("too short for 1000 coordinates"), std::string::npos);
  EXPECT_EQ(acc, std::vector<float>(d, 1.0f));
  // The message it was cut from still decodes.
  ASSERT_TRUE(codec.decode_add(good, layout, acc).ok());
}

TEST(Qsgd, LevelsAboveSAreMalformed) {
  // s = 5 needs 3 bit-planes, which can also spell 6 and 7: the decoder must refuse them.
  const auto layout = GradientLayout::whole(10);
  QsgdCodec codec(QsgdOptions{.s = 5});
  Rng rng(1);
  auto bytes = codec.encode(normal_values(10, 1), layout, rng).bytes;
  const std::size_t planes_at = kHeaderBytes + 4 + 4 + 8;     // s, norm, signs
  for (int p = 0; p < 3; ++p) bytes[planes_at + 8 * p] |= 1;  // coordinate 0 gets level 7
  std::vector<float> acc(10, 0.0f);
  EXPECT_FALSE(codec.decode_add(bytes, layout, acc).ok());
  EXPECT_EQ(acc, std::vector<float>(10, 0.0f));
}

TEST(Qsgd, ZeroVectorEncodesToZero) {
  const auto layout = GradientLayout::whole(100);
  for (bool elias : {false, true}) {
    QsgdCodec codec(QsgdOptions{.s = 8, .elias = elias});
    Rng rng(1);
    EXPECT_EQ(codec.decode(codec.encode(std::vector<float>(100, 0.0f), layout, rng).bytes, layout).value(),
              std::vector<float>(100, 0.0f));
  }
}

// A layer whose entries are all subnormal has a norm below s/FLT_MAX, so s/norm overflows float:
// its exact zeros must still decode to 0 (not to ±norm), and every decoded value stays within the
// layer's norm; the normal layer beside it is unaffected. Every ISA level.
TEST(Qsgd, SubnormalLayerKeepsZerosAtZero) {
  const auto layout = GradientLayout::from_sizes({{"tiny", 40}, {"normal", 40}}).value();
  std::vector<float> v(80, 0.0f);
  for (std::size_t i = 0; i < 40; i += 3) v[i] = (i % 2 ? -1.0f : 1.0f) * 1e-41f;  // subnormal, others exact 0
  for (std::size_t i = 40; i < 80; ++i) v[i] = 0.01f * static_cast<float>(i) - 0.5f;
  for (auto isa : kernels::supported_isas()) {
    kernels::ScopedIsaLimit cap(isa);
    for (bool elias : {false, true}) {
      QsgdCodec codec(QsgdOptions{.s = 16, .elias = elias, .granularity = Granularity::kLayer});
      Rng rng(4);
      const auto decoded = codec.decode(codec.encode(v, layout, rng).bytes, layout).value();
      for (std::size_t i = 0; i < 40; ++i) {
        ASSERT_TRUE(std::isfinite(decoded[i])) << i;
        if (v[i] == 0.0f) {
          EXPECT_EQ(decoded[i], 0.0f) << kernels::isa_name(isa) << " elias " << elias << " i " << i;
        }
        EXPECT_LE(std::fabs(decoded[i]), 1e-40f) << i;
      }
      for (std::size_t i = 40; i < 80; ++i) EXPECT_TRUE(std::isfinite(decoded[i]));
    }
  }
}

TEST(TernGrad, IsUnbiasedAndTernary) {
  // t_i = s sign(g_i) b_i, b_i ~ Bernoulli(|g_i|/s): variance s|g_i| - g_i² <= s²/4.
  // Tolerance: 5 standard errors over 20000 fixed-seed trials.
  const auto layout = GradientLayout::from_sizes({{"a", 30}, {"b", 34}}).value();
  const auto v = normal_values(layout.total_size(), 5);
  TernGradCodec codec(TernGradOptions{.clip = 0.0f, .granularity = Granularity::kLayer});
  constexpr int kTrials = 20000;
  const auto m = moments(codec, v, layout, kTrials);
  for (const auto& layer : layout.layers()) {
    double scale = 0;
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i)
      scale = std::max(scale, double(std::fabs(v[i])));
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      const double sigma = std::sqrt(std::max(0.0, scale * std::fabs(v[i]) - double(v[i]) * v[i]));
      EXPECT_NEAR(m.mean[i], v[i], 5 * sigma / std::sqrt(kTrials) + 1e-6) << i;
    }
  }
  Rng rng(1);
  const auto once = codec.decode(codec.encode(v, layout, rng).bytes, layout).value();
  for (const auto& layer : layout.layers()) {
    double scale = 0;
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i)
      scale = std::max(scale, double(std::fabs(v[i])));
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      EXPECT_TRUE(once[i] == 0.0f || std::fabs(std::fabs(once[i]) - scale) < 1e-6) << once[i];
    }
  }
}

TEST(TernGrad, ClippingBoundsTheScaleAndTheVariance) {
  const auto layout = GradientLayout::whole(2000);
  auto v = normal_values(2000, 6);
  v[17] = 1000.0f;  // one outlier makes s = max|g| huge
  TernGradCodec plain(TernGradOptions{.clip = 0.0f, .granularity = Granularity::kModel});
  TernGradCodec clipped(TernGradOptions{.clip = 2.5f, .granularity = Granularity::kModel});
  Rng a(1), b(1);
  const auto encoded = clipped.encode(v, layout, a);
  EXPECT_EQ(encoded.size(), 24u + 4u + 16u * words(2000));
  float scale;
  std::memcpy(&scale, encoded.bytes.data() + kHeaderBytes, 4);
  double mean = 0, sq = 0;
  for (float x : v) {
    mean += x;
    sq += double(x) * x;
  }
  mean /= 2000;
  const double sigma = std::sqrt(sq / 2000 - mean * mean);
  EXPECT_NEAR(scale, 2.5 * sigma, 1e-3 * sigma);
  // Away from the outlier (which clipping biases), the variance falls with the scale.
  const auto m_plain = moments(plain, v, layout, 200);
  const auto m_clip = moments(clipped, v, layout, 200);
  EXPECT_LT(m_clip.mse_of(18, 2000), m_plain.mse_of(18, 2000) / 10);
  (void)b;
}

TEST(TernGrad, LayerAndModelScalesDiffer) {
  const auto layout = GradientLayout::from_sizes({{"loud", 50}, {"quiet", 50}}).value();
  auto v = normal_values(100, 7);
  for (std::size_t i = 0; i < 50; ++i) v[i] *= 100;
  TernGradCodec model(TernGradOptions{.clip = 0, .granularity = Granularity::kModel});
  TernGradCodec layer(TernGradOptions{.clip = 0, .granularity = Granularity::kLayer});
  // The quiet layer: whole-model scaling sends it mostly zeros with huge values, per-layer
  // scaling keeps its variance small.
  const auto mm = moments(model, v, layout, 500);
  const auto ml = moments(layer, v, layout, 500);
  EXPECT_GT(mm.mse_of(50, 100), 10 * ml.mse_of(50, 100));
}

}  // namespace
}  // namespace ballot::coding
