#include "coding/dgc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "codec_test_util.h"
#include "coding/codec_registry.h"
#include "coding/detail/sparse.h"
#include "coding/wire_format.h"

namespace ballot::coding {
namespace {

using testing::normal_values;

// The (index, value) pairs a sparse message carries, in order.
std::vector<std::pair<std::uint32_t, float>> entries(const EncodedGradient& encoded, std::size_t segments = 1) {
  std::vector<std::pair<std::uint32_t, float>> out;
  std::size_t total = 0;
  for (std::size_t s = 0; s < segments; ++s)
    total += load_pod<std::uint32_t>(encoded.bytes.data() + kHeaderBytes + 4 * s);
  const std::size_t indices_at = kHeaderBytes + 4 * segments, values_at = indices_at + 4 * total;
  for (std::size_t j = 0; j < total; ++j) {
    out.emplace_back(load_pod<std::uint32_t>(encoded.bytes.data() + indices_at + 4 * j),
                     load_pod<float>(encoded.bytes.data() + values_at + 4 * j));
  }
  return out;
}

DgcOptions options_with(double ratio, float momentum) {
  DgcOptions options;
  options.ratio = ratio;
  options.momentum = momentum;
  options.granularity = Granularity::kModel;
  return options;
}

TEST(Dgc, MomentumCorrectionAndMaskingMatchAHandComputedExample) {
  // m = 0.5, d = 4, one coordinate per round (k = ⌈0.25·4⌉). By hand, eq. 5 and §3.2:
  //   g1 = [1, -2, .5, 3]: u = v = g1; send v3 = 3;   u = v = [1, -2, .5, 0]
  //   g2 = [1, 1, 1, 1]:   u = [1.5, 0, 1.25, 1], v = [2.5, -2, 1.75, 1]; send v0 = 2.5;
  //                        u = [0, 0, 1.25, 1], v = [0, -2, 1.75, 1]
  //   g3 = [0, -1, 0, 0]:  u = [0, -1, .625, .5], v = [0, -3, 2.375, 1.5]; send v1 = -3;
  //                        u = [0, 0, .625, .5], v = [0, 0, 2.375, 1.5]
  DgcCodec codec(options_with(0.25, 0.5f));
  const auto layout = GradientLayout::whole(4);
  const std::vector<std::vector<float>> g{{1, -2, 0.5f, 3}, {1, 1, 1, 1}, {0, -1, 0, 0}};
  const std::vector<std::pair<std::uint32_t, float>> sent{{3, 3.0f}, {0, 2.5f}, {1, -3.0f}};
  const std::vector<std::vector<float>> u{{1, -2, 0.5f, 0}, {0, 0, 1.25f, 1}, {0, 0, 0.625f, 0.5f}};
  const std::vector<std::vector<float>> v{{1, -2, 0.5f, 0}, {0, -2, 1.75f, 1}, {0, 0, 2.375f, 1.5f}};
  Rng rng(1);
  for (int step = 0; step < 3; ++step) {
    const auto encoded = codec.encode(g[step], layout, rng);
    EXPECT_EQ(entries(encoded), (std::vector<std::pair<std::uint32_t, float>>{sent[step]})) << step;
    EXPECT_EQ(std::vector<float>(codec.momentum().begin(), codec.momentum().end()), u[step]) << step;
    EXPECT_EQ(std::vector<float>(codec.velocity().begin(), codec.velocity().end()), v[step]) << step;
    std::vector<float> expected(4, 0.0f);
    expected[sent[step].first] = sent[step].second;
    EXPECT_EQ(codec.decode(encoded.bytes, layout).value(), expected);
  }
  EXPECT_EQ(codec.rounds(), 3u);
}

TEST(Dgc, MaskingClearsMomentumAndAccumulationOfSentCoordinatesOnly) {
  // Sampled-threshold path (segments >= kExactBelow), per layer.
  const auto layout = GradientLayout::from_sizes({{"a", 20000}, {"b", 9000}, {"c", 100}}).value();
  DgcOptions options;
  options.ratio = 0.01;
  DgcCodec codec(options);
  Rng rng(3);
  for (int step = 0; step < 4; ++step) {
    const auto g = normal_values(layout.total_size(), 40 + step);
    const auto encoded = codec.encode(g, layout, rng);
    const auto decoded = codec.decode(encoded.bytes, layout).value();
    std::size_t sent = 0;
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      if (decoded[i] != 0.0f) {
        ++sent;
        EXPECT_EQ(codec.momentum()[i], 0.0f) << i;
        EXPECT_EQ(codec.velocity()[i], 0.0f) << i;
      } else {
        EXPECT_NE(codec.momentum()[i], 0.0f) << i;  // normal data: no exact zeros
      }
    }
    // Each layer sends between 0.8·k and k coordinates: 200, 90 and 1 at most.
    EXPECT_LE(sent, 200u + 90u + 1u);
    EXPECT_GE(sent, 160u + 72u + 1u);
  }
}

TEST(Dgc, SampledThresholdSelectsAboutKAndOnlyTheLargest) {
  // 2% sample of 2^18 normal values, k = 2% of them: the sampled (k·m/n)-th largest puts
  // k·(1 ± ~10%) above it (relative sd ≈ 1/√(k·m/n) = 1/√105). Tolerance: ±35%, > 3 sd.
  const std::size_t n = std::size_t{1} << 18, k = n / 50, samples = n / 50;
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    const auto x = normal_values(n, 100 + seed);
    Rng rng(seed, 9);
    std::vector<std::uint32_t> indices;
    const auto result = detail::select_by_sampled_threshold(x.data(), n, k, samples, rng, indices);
    EXPECT_NEAR(static_cast<double>(result.first_pass), static_cast<double>(k), 0.35 * k) << seed;
    EXPECT_LE(indices.size(), k);
    EXPECT_GE(indices.size(), static_cast<std::size_t>(std::ceil(detail::kSampledLowerBound * k)));
    EXPECT_EQ(result.selected, indices.size());
    ASSERT_TRUE(std::is_sorted(indices.begin(), indices.end()));
    // The selected entries are the largest magnitudes: min over selected >= max over the rest.
    std::vector<char> chosen(n, 0);
    float smallest = std::numeric_limits<float>::infinity();
    for (auto i : indices) {
      chosen[i] = 1;
      smallest = std::min(smallest, std::fabs(x[i]));
    }
    float largest_rest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!chosen[i]) largest_rest = std::max(largest_rest, std::fabs(x[i]));
    }
    EXPECT_GE(smallest, largest_rest) << seed;
  }
}

TEST(Dgc, SampledThresholdFallsBackWhenTooManyOrTooFewPass) {
  const std::size_t n = 50000, k = 500;
  // Too many: half the entries share the largest magnitude, so the sampled threshold lets ~n/2
  // through and the exact top-k finishes with the lowest indices among the ties.
  std::vector<float> ties(n, 1.0f);
  for (std::size_t i = 0; i < n; i += 2) ties[i] = 2.0f;
  Rng rng(5);
  std::vector<std::uint32_t> indices;
  auto result = detail::select_by_sampled_threshold(ties.data(), n, k, 500, rng, indices);
  EXPECT_TRUE(result.exact);
  ASSERT_EQ(indices.size(), k);
  for (std::size_t j = 0; j < k; ++j) EXPECT_EQ(indices[j], 2 * j);
  // Too few: a handful of spikes the sample misses; the threshold is lowered until >= 0.8·k pass.
  std::vector<float> spikes(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) spikes[i] = static_cast<float>(i % 1000) * 1e-3f;
  for (std::size_t i = 0; i < 10; ++i) spikes[4999 * i + 7] = 100.0f;
  indices.clear();
  result = detail::select_by_sampled_threshold(spikes.data(), n, k, 500, rng, indices);
  EXPECT_GE(indices.size(), 400u);
  EXPECT_LE(indices.size(), k);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_TRUE(std::binary_search(indices.begin(), indices.end(), static_cast<std::uint32_t>(4999 * i + 7)));
  }
}

TEST(Dgc, LocalClippingBoundsTheGradientNormPerLayer) {
  // §3.2: each layer's gradient is scaled to L2 norm <= clip before it enters the momentum.
  // After round 1 (u = v = clipped g before masking), the clipped gradient is u on the unsent
  // coordinates plus the decoded message on the sent ones.
  const auto layout = GradientLayout::from_sizes({{"loud", 100}, {"mid", 100}, {"small", 100}}).value();
  auto g = normal_values(300, 8);
  for (std::size_t i = 0; i < 100; ++i) g[i] *= 100.0f;   // norm ~ 1000
  for (std::size_t i = 200; i < 300; ++i) g[i] *= 0.01f;  // norm ~ 0.1: below the clip
  DgcOptions options;
  options.ratio = 0.05;
  options.clip = 1.0f;
  DgcCodec codec(options);
  Rng rng(1);
  const auto decoded = codec.decode(codec.encode(g, layout, rng).bytes, layout).value();
  for (const auto& layer : layout.layers()) {
    double norm_in = 0, norm_out = 0;
    std::vector<float> clipped(layer.size);
    for (std::size_t i = layer.offset; i < layer.offset + layer.size; ++i) {
      clipped[i - layer.offset] = decoded[i] != 0.0f ? decoded[i] : codec.momentum()[i];
      norm_in += double(g[i]) * g[i];
      norm_out += double(clipped[i - layer.offset]) * clipped[i - layer.offset];
    }
    norm_in = std::sqrt(norm_in);
    norm_out = std::sqrt(norm_out);
    const double factor = norm_in > 1.0 ? 1.0 / norm_in : 1.0;
    EXPECT_NEAR(norm_out, std::min(norm_in, 1.0), 1e-5 * std::min(norm_in, 1.0)) << layer.name;
    for (std::size_t j = 0; j < layer.size; ++j) {
      EXPECT_NEAR(clipped[j], g[layer.offset + j] * factor, 1e-6 * std::fabs(g[layer.offset + j] * factor) + 1e-12);
    }
  }
}

TEST(Dgc, WarmupRampsTheDensityExponentially) {
  // ρ_t = 0.25·(0.001/0.25)^(t/4) for t < 4, then 0.001: 75% sparsity first, 99.9% at the end.
  DgcOptions options = options_with(0.001, 0.9f);
  options.warmup = 4;
  DgcCodec codec(options);
  EXPECT_DOUBLE_EQ(codec.density(0), 0.25);
  EXPECT_NEAR(codec.density(2), std::sqrt(0.25 * 0.001), 1e-12);
  EXPECT_DOUBLE_EQ(codec.density(4), 0.001);
  EXPECT_DOUBLE_EQ(codec.density(1000), 0.001);
  const auto layout = GradientLayout::whole(4000);            // exact path: exactly ⌈ρ_t·n⌉ per round
  EXPECT_EQ(codec.wire_size(layout), 24u + 4u + 8u * 1000u);  // bounded by the largest density
  Rng rng(2);
  for (std::uint64_t round = 0; round < 6; ++round) {
    const auto encoded = codec.encode(normal_values(4000, round), layout, rng);
    const auto count = static_cast<std::size_t>(std::ceil(codec.density(round) * 4000));
    EXPECT_EQ(entries(encoded).size(), count) << round;
    EXPECT_EQ(encoded.size(), 24u + 4u + 8u * count);
    EXPECT_LE(encoded.size(), codec.wire_size(layout));
  }
}

TEST(Dgc, RoundTripSendsTheLargestAccumulatedValues) {
  const auto layout = GradientLayout::whole(50000);
  DgcCodec codec(options_with(0.01, 0.9f));
  const auto g = normal_values(50000, 12);
  Rng rng(4);
  const auto encoded = codec.encode(g, layout, rng);
  const auto sent = entries(encoded);
  EXPECT_EQ(encoded.size(), 24u + 4u + 8u * sent.size());
  EXPECT_LE(sent.size(), 500u);
  EXPECT_GE(sent.size(), 400u);
  // Round 1: v = g, so the message carries g's largest entries, exactly.
  std::vector<float> magnitudes(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) magnitudes[i] = std::fabs(g[i]);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(sent.size() - 1),
                   magnitudes.end(), std::greater<float>());
  const float kth = magnitudes[sent.size() - 1];
  for (const auto& [i, value] : sent) {
    EXPECT_EQ(value, g[i]);
    EXPECT_GE(std::fabs(value), kth);
  }
  const auto decoded = codec.decode(encoded.bytes, layout).value();
  std::size_t nonzero = 0;
  for (float v : decoded) nonzero += v != 0.0f;
  EXPECT_EQ(nonzero, sent.size());
}

TEST(Dgc, StateSavesAndRestoresMomentumAccumulationAndRound) {
  const auto layout = GradientLayout::from_sizes({{"a", 5000}, {"b", 300}}).value();
  DgcOptions options;
  options.ratio = 0.01;
  options.warmup = 10;
  DgcCodec a(options), b(options);
  Rng rng(6);
  for (int step = 0; step < 3; ++step) (void)a.encode(normal_values(layout.total_size(), step), layout, rng);
  const auto state = a.save_state();
  ASSERT_TRUE(b.load_state(state, layout).ok());
  EXPECT_EQ(b.rounds(), 3u);
  EXPECT_TRUE(std::equal(a.momentum().begin(), a.momentum().end(), b.momentum().begin(), b.momentum().end()));
  EXPECT_TRUE(std::equal(a.velocity().begin(), a.velocity().end(), b.velocity().begin(), b.velocity().end()));
  const auto g = normal_values(layout.total_size(), 99);
  Rng ra(7), rb(7);
  EXPECT_EQ(a.encode(g, layout, ra).bytes, b.encode(g, layout, rb).bytes);
  // Blobs that are not a DGC state are refused and change nothing.
  const auto saved = b.save_state();
  std::uint8_t eight[8] = {};
  const auto no_rounds = write_state(CodecId::kDgc, a.velocity(), write_state(CodecId::kDgc, a.momentum()));
  const auto mismatched = write_state(CodecId::kDgc, a.velocity(), write_state(CodecId::kDgc, {}, eight));
  const auto foreign = write_state(CodecId::kTopK, a.velocity(), write_state(CodecId::kDgc, a.momentum(), eight));
  for (const auto& bad : {no_rounds, mismatched, foreign}) EXPECT_FALSE(b.load_state(bad, layout).ok());
  EXPECT_EQ(b.save_state(), saved);
}

// What a device twin builds on: the state blob from its parts, and the sample size per segment.
TEST(Dgc, StateBlobAndSampleCountAreTheEncodersOwn) {
  DgcOptions options;
  options.ratio = 0.01;
  options.sample = 0.02;
  DgcCodec codec(options);
  const auto layout = GradientLayout::whole(6000);
  Rng rng(2);
  (void)codec.encode(normal_values(6000, 1), layout, rng);
  EXPECT_EQ(DgcCodec::state_blob(codec.momentum(), codec.velocity(), codec.rounds()), codec.save_state());
  // A blob with no arrays carries the round count alone (the warm-up goes on from it).
  DgcCodec fresh(options);
  ASSERT_TRUE(fresh.load_state(DgcCodec::state_blob({}, {}, 41), layout).ok());
  EXPECT_EQ(fresh.rounds(), 41u);
  EXPECT_TRUE(fresh.velocity().empty());
  // Under kExactBelow the exact top-k (no sample); above, max(sample·n, 8n/k) capped at n.
  EXPECT_EQ(codec.sample_count(DgcCodec::kExactBelow - 1, 40), 0u);
  EXPECT_EQ(codec.sample_count(100000, 1000), 2000u);  // 0.02 · n
  EXPECT_EQ(codec.sample_count(100000, 100), 8000u);   // 8n/k
  EXPECT_EQ(codec.sample_count(100000, 1), 100000u);   // capped at n: the exact top-k
  // The sampled encoder draws exactly sample_count() coordinates from the stream.
  const auto big = GradientLayout::whole(100000);
  DgcCodec drawing(options);
  Rng counted(3);
  (void)drawing.encode(normal_values(100000, 5), big, counted);
  Rng expected(3);
  for (std::size_t j = 0; j < drawing.sample_count(100000, 1000); ++j) (void)expected.uniform_int(100000);
  EXPECT_EQ(counted.position(), expected.position());
}

// The threshold passes alone, with a count function in place of the selection: a first estimate
// that lets too few pass is lowered (the sample rank doubled) until at least 0.8k pass, or the
// sample runs out (threshold 0).
TEST(Dgc, SampledThresholdPassesLowerTheEstimateUntilEnoughPass) {
  std::vector<float> keys = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0.5f};
  std::vector<float> seen;
  // n = 100, k = 10, m = 10: rank 1 first (threshold 9).
  auto result = detail::sampled_threshold_passes(keys, 100, 10, [&](float t) -> std::size_t {
    seen.push_back(t);
    return t >= 6 ? 2 : 9;
  });
  EXPECT_EQ(seen, (std::vector<float>{9, 8, 6, 2}));  // ranks 1, 2, 4, 8
  EXPECT_EQ(result.passes, 4);
  EXPECT_EQ(result.first_pass, 2u);
  EXPECT_EQ(result.selected, 9u);
  EXPECT_FALSE(result.exact);
  seen.clear();
  result = detail::sampled_threshold_passes(keys, 100, 10, [&](float t) -> std::size_t {
    seen.push_back(t);
    return t > 0 ? 0 : 100;
  });
  EXPECT_EQ(seen.back(), 0.0f);  // rank 16 > 10 samples: everything is a candidate
  EXPECT_TRUE(result.exact);
  EXPECT_EQ(result.selected, 10u);
}

TEST(Dgc, CorruptedMessagesAreErrors) {
  const auto layout = GradientLayout::whole(5000);
  DgcCodec codec(options_with(0.01, 0.9f));
  Rng rng(8);
  const auto encoded = codec.encode(normal_values(5000, 1), layout, rng);
  const std::size_t count = entries(encoded).size();
  ASSERT_GT(count, 1u);
  std::vector<float> acc(5000, 0.0f);
  auto out_of_range = encoded.bytes;  // last index -> 5000
  const std::uint32_t big = 5000;
  std::memcpy(out_of_range.data() + kHeaderBytes + 4 + 4 * (count - 1), &big, 4);
  EXPECT_FALSE(codec.decode_add(out_of_range, layout, acc).ok());
  auto unordered = encoded.bytes;  // first index repeated
  std::memcpy(unordered.data() + kHeaderBytes + 4 + 4, unordered.data() + kHeaderBytes + 4, 4);
  EXPECT_FALSE(codec.decode_add(unordered, layout, acc).ok());
  auto too_many = encoded.bytes;  // count above the segment size
  const std::uint32_t huge = 5001;
  std::memcpy(too_many.data() + kHeaderBytes, &huge, 4);
  EXPECT_FALSE(codec.decode_add(too_many, layout, acc).ok());
  auto as_topk = encoded.bytes;  // the same payload under another codec id is not a DGC message
  as_topk[3] = static_cast<std::uint8_t>(CodecId::kTopK);
  EXPECT_FALSE(codec.decode_add(as_topk, layout, acc).ok());
  EXPECT_EQ(acc, std::vector<float>(5000, 0.0f));
}

TEST(Dgc, RegistrySpecRoundTripsAndChecksOptions) {
  auto made = make_codec("dgc:ratio=0.001,momentum=0.9,clip=2.5,warmup=100");
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  const auto* dgc = dynamic_cast<const DgcCodec*>(made->get());
  ASSERT_NE(dgc, nullptr);
  EXPECT_EQ(dgc->options().clip, 2.5f);
  EXPECT_EQ(dgc->options().warmup, 100u);
  EXPECT_EQ(dgc->granularity(), Granularity::kLayer);
  const std::string spec = (*made)->spec();
  EXPECT_EQ(spec, "dgc:clip=2.5,granularity=layer,momentum=0.9,ratio=0.001,sample=0.01,warmup=100,warmup_start=0.25");
  EXPECT_EQ((*make_codec(spec))->spec(), spec);
  for (const char* bad : {"dgc:ratio=0", "dgc:ratio=1.5", "dgc:momentum=1", "dgc:clip=-1", "dgc:warmup=-2",
                          "dgc:warmup_start=0", "dgc:sample=0", "dgc:ef=1", "dgc:k=5"}) {
    EXPECT_FALSE(make_codec(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace ballot::coding
