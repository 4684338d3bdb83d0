#include "attacks/gradient_attacks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/enforce.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"
#include "robust/registry.h"

namespace ballot::attacks {
namespace {

// rows × d floats: row i = truth + noise·N(0, 1) (+ offset), from a fixed seed.
std::vector<float> noisy_rows(const std::vector<float>& truth, std::size_t rows, double noise, std::uint64_t seed) {
  const std::size_t d = truth.size();
  std::vector<float> out(rows * d);
  Rng rng(seed);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < d; ++c) out[i * d + c] = static_cast<float>(truth[c] + noise * rng.normal());
  return out;
}

std::vector<float> constant(std::size_t d, float value) { return std::vector<float>(d, value); }

double dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (std::size_t c = 0; c < a.size(); ++c) s += static_cast<double>(a[c]) * b[c];
  return s;
}

Behaviour attack(const char* text) { return *Behaviour::parse(text); }

// ---- quantiles and z ---------------------------------------------------------------------------

TEST(NormalQuantile, KnownValues) {
  // Reference values: Python's statistics.NormalDist().inv_cdf (Wichura's AS241, ~1e-16).
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(normal_quantile(0.975), 1.9599639845400536, 1e-13);
  EXPECT_NEAR(normal_quantile(0.9), 1.2815515655446008, 1e-13);
  EXPECT_NEAR(normal_quantile(0.75), 0.6744897501960817, 1e-13);
  EXPECT_NEAR(normal_quantile(0.6), 0.2533471031357998, 1e-13);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306167813, 1e-12);
  EXPECT_NEAR(normal_quantile(1e-10), -6.361340902404056, 1e-11);
  EXPECT_NEAR(normal_quantile(0.8413447460685429), 1.0, 1e-13);  // Φ(1)
  for (double p : {1e-8, 0.01, 0.02425, 0.1, 0.3, 0.49}) EXPECT_NEAR(normal_quantile(1 - p), -normal_quantile(p), 1e-9);
  EXPECT_EQ(normal_quantile(0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(normal_quantile(1), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(normal_quantile(-0.1)));
  EXPECT_TRUE(std::isnan(normal_quantile(std::nan(""))));
  // Monotone across the region boundaries of the approximation.
  double previous = normal_quantile(1e-6);
  for (double p = 2e-6; p < 1; p += 1e-3) {
    const double q = normal_quantile(p);
    EXPECT_GT(q, previous);
    previous = q;
  }
}

TEST(AlieZ, HandComputedValues) {
  // n = 50, m = 24 (Baruch et al.): s* = ⌊26⌋ − 24 = 2, p = (50 − 24 − 2)/26 = 24/26.
  EXPECT_NEAR(alie_z(50, 24), 1.4260768722728479, 1e-12);
  // n = 20, m = 5: s* = 11 − 5 = 6, p = 9/15 = 0.6.
  EXPECT_NEAR(alie_z(20, 5), 0.2533471031357998, 1e-12);
  // n = 7, m = 3: s* = 4 − 3 = 1, p = 3/4.
  EXPECT_NEAR(alie_z(7, 3), 0.6744897501960817, 1e-12);
  // n = 5, m = 1 and n = 10, m = 2: p = 1/2, z = 0.
  EXPECT_NEAR(alie_z(5, 1), 0.0, 1e-15);
  EXPECT_NEAR(alie_z(10, 2), 0.0, 1e-15);
  // Clamped: n = 5, m = 3 has s* = 0 and p = 1 → p = 1 − 1/4; n = 1, m = 0 has p = 0 → p = 1/2.
  EXPECT_NEAR(alie_z(5, 3), 0.6744897501960817, 1e-12);
  EXPECT_NEAR(alie_z(1, 0), 0.0, 1e-15);
  EXPECT_THROW(alie_z(4, 4), EnforceError);
}

// ---- moments -----------------------------------------------------------------------------------

TEST(HonestMoments, MatchesTwoPassInLongDoubleWithALargeOffset) {
  // |mean| ≫ std: the case where Σx² − (Σx)²/n would cancel catastrophically in float.
  const std::size_t n = 37, d = 300;
  std::vector<float> truth(d);
  for (std::size_t c = 0; c < d; ++c) truth[c] = 1e4f + static_cast<float>(c);
  const auto rows = noisy_rows(truth, n, 0.5, 3);
  std::vector<double> mean, stddev;
  honest_moments(robust::InputMatrix(rows.data(), n, d), mean, &stddev);
  for (std::size_t c = 0; c < d; ++c) {
    long double s = 0, ss = 0;
    for (std::size_t i = 0; i < n; ++i) s += rows[i * d + c];
    const long double m = s / n;
    for (std::size_t i = 0; i < n; ++i) ss += (rows[i * d + c] - m) * (rows[i * d + c] - m);
    EXPECT_NEAR(mean[c], static_cast<double>(m), 1e-9 * 1e4);
    EXPECT_NEAR(stddev[c], static_cast<double>(std::sqrt(ss / n)), 1e-9);
  }
  std::vector<double> only_mean;
  honest_moments(robust::InputMatrix(rows.data(), n, d), only_mean, nullptr);
  for (std::size_t c = 0; c < d; ++c) EXPECT_NEAR(only_mean[c], mean[c], 1e-12 * 1e4);
  honest_moments(robust::InputMatrix(rows.data(), 0, d), only_mean, &stddev);
  EXPECT_EQ(only_mean, std::vector<double>(d, 0.0));
}

// ---- each attack's formula ---------------------------------------------------------------------

class CraftGradient : public ::testing::Test {
 protected:
  static constexpr std::size_t kHonest = 26, kD = 512;
  CraftGradient() : truth_(kD), own_(kD) {
    Rng rng(5);
    for (auto& t : truth_) t = static_cast<float>(rng.normal());
    rows_ = noisy_rows(truth_, kHonest, 1.0, 6);
    for (auto& o : own_) o = static_cast<float>(rng.normal());
    ctx_.honest = robust::InputMatrix(rows_.data(), kHonest, kD);
    ctx_.own = own_;
    ctx_.n = 50;
    ctx_.m = 24;
    honest_moments(ctx_.honest, mean_, &stddev_);
  }
  std::vector<float> craft(const char* text, std::uint64_t seed = 1) {
    Rng rng(seed);
    std::vector<float> out;
    craft_gradient(attack(text), ctx_, rng, out);
    EXPECT_EQ(out.size(), kD);
    return out;
  }
  std::vector<float> truth_, own_, rows_;
  std::vector<double> mean_, stddev_;
  GradientContext ctx_;
};

TEST_F(CraftGradient, Alie) {
  const auto out = craft("alie");
  const double z = alie_z(50, 24);
  for (std::size_t c = 0; c < kD; ++c) EXPECT_NEAR(out[c], mean_[c] - z * stddev_[c], 1e-5);
  // Every attacker sends the same vector: it does not depend on its own gradient or its rng.
  ctx_.own = {};
  EXPECT_EQ(craft("alie", 99), out);
  const auto fixed = craft("alie:z=0.5");
  for (std::size_t c = 0; c < kD; ++c) EXPECT_NEAR(fixed[c], mean_[c] - 0.5 * stddev_[c], 1e-5);
}

TEST_F(CraftGradient, IpmMimicZeroScaledSignFlipNone) {
  const auto ipm = craft("ipm:eps=0.5");
  for (std::size_t c = 0; c < kD; ++c) EXPECT_NEAR(ipm[c], -0.5 * mean_[c], 1e-6);
  const auto mimic = craft("mimic:target=3");
  EXPECT_TRUE(std::equal(mimic.begin(), mimic.end(), rows_.begin() + 3 * kD));
  EXPECT_EQ(craft("mimic:target=29"), mimic);  // modulo the 26 honest workers
  EXPECT_EQ(craft("zero"), constant(kD, 0.0f));
  const auto scaled = craft("scaled:factor=3");
  const auto flip = craft("sign_flip");
  const auto none = craft("none");
  for (std::size_t c = 0; c < kD; ++c) {
    EXPECT_FLOAT_EQ(scaled[c], 3 * own_[c]);
    EXPECT_FLOAT_EQ(flip[c], -own_[c]);
    EXPECT_FLOAT_EQ(none[c], own_[c]);
  }
  // Without the attacker's own gradient: the honest mean stands in for it.
  ctx_.own = {};
  const auto blind_flip = craft("sign_flip");
  const auto blind_scaled = craft("scaled");
  for (std::size_t c = 0; c < kD; ++c) {
    EXPECT_NEAR(blind_flip[c], -mean_[c], 1e-6);
    EXPECT_NEAR(blind_scaled[c], -10 * mean_[c], 1e-5);
  }
}

TEST_F(CraftGradient, GaussianStatisticsAndDeterminism) {
  constexpr std::size_t d = 20000;
  std::vector<float> dummy(d, 1.0f);
  GradientContext ctx;
  ctx.own = dummy;
  ctx.n = 10;
  ctx.m = 3;
  Rng rng(17), same(17), other(18);
  std::vector<float> a, b, c;
  craft_gradient(attack("gaussian"), ctx, rng, a);
  craft_gradient(attack("gaussian"), ctx, same, b);
  craft_gradient(attack("gaussian"), ctx, other, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0, sum2 = 0;
  for (float v : a) {
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  const double mean = sum / d, sd = std::sqrt(sum2 / d - mean * mean);
  EXPECT_LT(std::abs(mean), 5 * 200 / std::sqrt(double(d)));  // 5 standard errors
  EXPECT_NEAR(sd, 200, 200 * 0.03);                           // sd of the sd ≈ 0.5%
}

TEST_F(CraftGradient, PreconditionsAreEnforced) {
  Rng rng(1);
  std::vector<float> out;
  for (const char* text : {"reverse", "omniscient", "label_flip", "crash"})
    EXPECT_THROW(craft_gradient(attack(text), ctx_, rng, out), EnforceError) << text;
  std::vector<float> wrong(kD + 1);
  ctx_.own = wrong;
  EXPECT_THROW(craft_gradient(attack("sign_flip"), ctx_, rng, out), EnforceError);
  GradientContext empty;
  EXPECT_THROW(craft_gradient(attack("mimic"), empty, rng, out), EnforceError);
}

TEST(CraftGradientInputs, NonFiniteHonestValuesDoNotCrash) {
  std::vector<float> rows = {1, std::nanf(""), 3, std::numeric_limits<float>::infinity(), 2, 2};
  GradientContext ctx;
  ctx.honest = robust::InputMatrix(rows.data(), 3, 2);
  ctx.n = 5;
  ctx.m = 2;
  Rng rng(1);
  std::vector<float> out;
  for (const char* text : {"alie", "ipm", "mimic", "sign_flip"}) {
    craft_gradient(attack(text), ctx, rng, out);
    EXPECT_EQ(out.size(), 2u);
    BitVector vote;
    craft_vote(attack(text), ctx, rng, vote);
    EXPECT_EQ(vote.size(), 2u);
  }
}

// ---- the vote path -----------------------------------------------------------------------------

TEST_F(CraftGradient, ScalingDoesNothingToTheVote) {
  Rng rng(1);
  BitVector honest = kernels::pack_signs(own_), vote, reversed;
  for (const char* text : {"scaled:factor=100", "scaled:factor=0.001", "scaled:factor=1e6"}) {
    craft_vote(attack(text), ctx_, rng, vote);
    EXPECT_EQ(vote, honest) << text;
  }
  craft_vote(attack("reverse"), ctx_, rng, reversed);
  for (const char* text : {"scaled", "scaled:factor=-0.001", "sign_flip"}) {
    craft_vote(attack(text), ctx_, rng, vote);
    EXPECT_EQ(vote, reversed) << text;  // a negative factor is a sign flip, whatever its size
  }
}

TEST_F(CraftGradient, IpmVoteIsMinusSignOfTheMeanForEveryEpsilon) {
  std::vector<float> mean(kD);
  for (std::size_t c = 0; c < kD; ++c) mean[c] = static_cast<float>(mean_[c]);
  BitVector expected = kernels::pack_signs(mean);
  expected.flip();
  Rng rng(1);
  for (const char* text : {"ipm:eps=0.01", "ipm", "ipm:eps=1", "ipm:eps=1000"}) {
    BitVector vote;
    craft_vote(attack(text), ctx_, rng, vote);
    EXPECT_EQ(vote, expected) << text;
  }
}

TEST_F(CraftGradient, SignDomainVotes) {
  Rng rng(4);
  BitVector vote;
  craft_vote(attack("directional:sign=-1"), ctx_, rng, vote);
  EXPECT_EQ(vote.size(), kD);
  EXPECT_EQ(vote.count_ones(), 0u);
  craft_vote(attack("directional"), ctx_, rng, vote);
  EXPECT_EQ(vote.count_ones(), kD);
  craft_vote(attack("random"), ctx_, rng, vote);
  EXPECT_NEAR(static_cast<double>(vote.count_ones()), kD / 2.0, 5 * std::sqrt(kD / 4.0));
  EXPECT_TRUE(vote.padding_is_clear());
  EXPECT_THROW(craft_vote(attack("omniscient"), ctx_, rng, vote), EnforceError);
}

// ---- what the attacks do to aggregation rules ----------------------------------------------------

// Stacks the honest rows and `m` copies of each attacker vector into one n×d buffer.
std::vector<float> stack(const std::vector<float>& honest, const std::vector<std::vector<float>>& attackers) {
  std::vector<float> all = honest;
  for (const auto& a : attackers) all.insert(all.end(), a.begin(), a.end());
  return all;
}

std::vector<float> aggregate(const char* rule, const std::vector<float>& all, std::size_t n, std::size_t d) {
  auto aggregator = robust::make_aggregator(rule);
  EXPECT_TRUE(aggregator.ok()) << rule;
  auto result = (*aggregator)->aggregate(robust::InputMatrix(all.data(), n, d));
  EXPECT_TRUE(result.ok()) << rule << ": " << result.error().message;
  return result->value;
}

TEST(AttacksOnTheMean, IpmTurnsTheMeanAgainstTheHonestMeanBeyondTheThreshold) {
  // With m attackers sending −ε·ḡ, the mean is ḡ·(n − m − m·ε)/n exactly, so its inner product
  // with ḡ is negative iff ε > (n − m)/m. (n, m) = (10, 4): threshold 1.5; (10, 5): threshold 1.
  for (const std::size_t m : {std::size_t{4}, std::size_t{5}}) {
    const std::size_t n = 10, d = 256;
    std::vector<float> truth(d);
    Rng rng(8);
    for (auto& t : truth) t = static_cast<float>(rng.normal());
    const auto honest = noisy_rows(truth, n - m, 1.0, 9);
    GradientContext ctx{robust::InputMatrix(honest.data(), n - m, d), {}, n, m};
    std::vector<double> mean;
    honest_moments(ctx.honest, mean, nullptr);
    std::vector<float> g_bar(mean.begin(), mean.end());
    const double norm2 = dot(g_bar, g_bar);
    const double threshold = static_cast<double>(n - m) / static_cast<double>(m);
    for (const double eps : {0.1, threshold - 0.25, threshold + 0.25, 10.0}) {
      Behaviour b = attack("ipm");
      b.epsilon = eps;
      std::vector<float> bad;
      craft_gradient(b, ctx, rng, bad);
      const auto agg = aggregate("mean", stack(honest, std::vector<std::vector<float>>(m, bad)), n, d);
      const double inner = dot(agg, g_bar);
      EXPECT_NEAR(inner, (static_cast<double>(n - m) - m * eps) / n * norm2, 1e-4 * norm2) << "eps " << eps;
      EXPECT_EQ(inner<0, eps> threshold) << "m " << m << " eps " << eps;
    }
  }
}

TEST(AttacksOnTheMean, AlieHidesInTheHonestSpreadAndBiasesTheMean) {
  // Baruch et al.'s setting n = 50, m = 24; a true gradient below the noise level (|g*| = 0.3σ,
  // the regime of SGD), all coordinates of one sign so that the bias direction −s opposes it.
  const std::size_t n = 50, m = 24, d = 2000;
  const auto truth = constant(d, 0.3f);
  const auto honest = noisy_rows(truth, n - m, 1.0, 21);
  GradientContext ctx{robust::InputMatrix(honest.data(), n - m, d), {}, n, m};
  Rng rng(1);
  std::vector<float> alie;
  craft_gradient(attack("alie"), ctx, rng, alie);
  std::vector<double> mean, stddev;
  honest_moments(ctx.honest, mean, &stddev);

  // "Little": the crafted vector lies inside the honest range on almost every coordinate.
  std::size_t inside = 0;
  for (std::size_t c = 0; c < d; ++c) {
    float lo = honest[c], hi = honest[c];
    for (std::size_t i = 1; i < n - m; ++i) {
      lo = std::min(lo, honest[i * d + c]);
      hi = std::max(hi, honest[i * d + c]);
    }
    inside += lo <= alie[c] && alie[c] <= hi;
  }
  EXPECT_GT(inside, d * 95 / 100);

  // "Enough": the mean moves by exactly (m/n)·z·s per coordinate, several times the honest
  // mean's own sampling error ‖s‖/√(n−m), and against the true gradient on most coordinates.
  const auto agg = aggregate("mean", stack(honest, std::vector<std::vector<float>>(m, alie)), n, d);
  const double z = alie_z(n, m);
  double shift2 = 0, noise2 = 0;
  std::size_t wrong_sign = 0, honest_wrong_sign = 0;
  for (std::size_t c = 0; c < d; ++c) {
    EXPECT_NEAR(agg[c], mean[c] - static_cast<double>(m) / n * z * stddev[c], 1e-4);
    shift2 += (agg[c] - mean[c]) * (agg[c] - mean[c]);
    noise2 += stddev[c] * stddev[c] / static_cast<double>(n - m);
    wrong_sign += agg[c] < 0;
    honest_wrong_sign += mean[c] < 0;
  }
  EXPECT_GT(std::sqrt(shift2), 3 * std::sqrt(noise2));
  EXPECT_GT(wrong_sign, d * 80 / 100);
  EXPECT_LT(honest_wrong_sign, d * 10 / 100);
  EXPECT_LT(dot(agg, truth), 0);
  EXPECT_GT(dot(std::vector<float>(mean.begin(), mean.end()), truth), 0);
}

TEST(AttacksOnTheMean, GaussianBreaksTheMeanButNotMedianTrimmedMeanOrKrum) {
  const std::size_t n = 11, m = 3, d = 400;
  std::vector<float> truth(d);
  Rng rng(2);
  for (auto& t : truth) t = static_cast<float>(rng.normal());
  const auto honest = noisy_rows(truth, n - m, 1.0, 3);
  GradientContext ctx{robust::InputMatrix(honest.data(), n - m, d), {}, n, m};
  std::vector<std::vector<float>> attackers(m);
  for (auto& a : attackers) craft_gradient(attack("gaussian"), ctx, rng, a);  // independent draws
  const auto all = stack(honest, attackers);

  std::vector<float> lo(d), hi(d);
  for (std::size_t c = 0; c < d; ++c) {
    lo[c] = hi[c] = honest[c];
    for (std::size_t i = 1; i < n - m; ++i) {
      lo[c] = std::min(lo[c], honest[i * d + c]);
      hi[c] = std::max(hi[c], honest[i * d + c]);
    }
  }
  for (const char* rule : {"median", "trimmed_mean:f=3", "krum:f=3"}) {
    const auto out = aggregate(rule, all, n, d);
    for (std::size_t c = 0; c < d; ++c) {
      EXPECT_GE(out[c], lo[c]) << rule << " coordinate " << c;
      EXPECT_LE(out[c], hi[c]) << rule << " coordinate " << c;
    }
  }
  const auto mean = aggregate("mean", all, n, d);
  std::size_t outside = 0;
  for (std::size_t c = 0; c < d; ++c) outside += mean[c] < lo[c] || mean[c] > hi[c];
  EXPECT_GT(outside, d / 2);
}

// ---- sign flip by a minority does not stop signSGD with majority vote --------------------------

// f(x) = ½‖x − x*‖², each worker's stochastic gradient x − x* + N(0, I); workers vote sign(g),
// attackers vote craft_vote(sign_flip) = −sign(their own g) (blind, non-colluding); x ← x − η·v.
double sign_sgd_distance(std::size_t n, std::size_t m, int steps) {
  const std::size_t d = 64;
  Rng rng(31);
  std::vector<float> target(d), x(d, 0.0f), g(d);
  for (auto& t : target) t = static_cast<float>(2 * rng.normal());
  std::vector<BitVector> votes(n);
  BitVector v;
  const Behaviour flip = attack("sign_flip");
  for (int t = 0; t < steps; ++t) {
    for (std::size_t w = 0; w < n; ++w) {
      for (std::size_t c = 0; c < d; ++c) g[c] = static_cast<float>(x[c] - target[c] + rng.normal());
      if (w < m) {
        GradientContext ctx{{}, g, n, m};
        craft_vote(flip, ctx, rng, votes[w]);
      } else {
        kernels::pack_signs(g, votes[w]);
      }
    }
    kernels::majority_vote(votes, v);
    const float lr = 0.08f / std::sqrt(1.0f + static_cast<float>(t) / 25);
    for (std::size_t c = 0; c < d; ++c) x[c] -= lr * static_cast<float>(v.sign(c));
  }
  double dist = 0;
  for (std::size_t c = 0; c < d; ++c) dist += (x[c] - target[c]) * (x[c] - target[c]);
  return std::sqrt(dist);
}

TEST(SignFlip, AMinorityDoesNotStopSignSgdWithMajorityVote) {
  const double start = sign_sgd_distance(9, 0, 0);
  const double clean = sign_sgd_distance(9, 0, 800);
  const double minority = sign_sgd_distance(9, 4, 800);
  const double majority = sign_sgd_distance(9, 5, 800);
  EXPECT_LT(clean, 0.1 * start);
  EXPECT_LT(minority, 0.2 * start);  // 4 of 9 flip: slower, but it converges
  EXPECT_GT(majority, start);        // 5 of 9 flip: the vote points away from x*
}

}  // namespace
}  // namespace ballot::attacks
