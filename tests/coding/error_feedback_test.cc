#include "coding/error_feedback.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

#include "codec_test_util.h"
#include "coding/cast_codecs.h"
#include "coding/codec_registry.h"
#include "coding/sign_codecs.h"
#include "coding/sparse_codecs.h"

namespace ballot::coding {
namespace {

using testing::normal_values;

// ALGORITHMS.md §2 (Karimireddy et al. 2019, Theorem I): f(x) = <a1,x>² + <a2,x>² with
// a_{1,2} = ±[1,-1] + ε[1,1], ε = 0.5, stochastic gradient 2<a_i,x> a_i for a random i, x0 = [1,1].
struct CounterExample {
  static constexpr std::array<std::array<float, 2>, 2> a{{{1.5f, -0.5f}, {-0.5f, 1.5f}}};
  static float f(const std::array<float, 2>& x) {
    float total = 0;
    for (const auto& ai : a) total += std::pow(ai[0] * x[0] + ai[1] * x[1], 2.0f);
    return total;
  }
  static std::vector<float> gradient(const std::array<float, 2>& x, Rng& rng) {
    const auto& ai = a[rng.uniform_int(2)];
    const float dot = ai[0] * x[0] + ai[1] * x[1];
    return {2 * dot * ai[0], 2 * dot * ai[1]};
  }
};

// Runs x <- x - decode(C(η g)) for `steps` steps; returns the final x and checks x1 + x2 and f on
// the way when `sign_invariant` (plain signSGD).
std::array<float, 2> run(Codec& codec, int steps, float eta, bool sign_invariant) {
  const auto layout = GradientLayout::whole(2);
  std::array<float, 2> x{1.0f, 1.0f};
  Rng sample(31337);
  Rng codec_rng(1);
  for (int t = 0; t < steps; ++t) {
    auto g = CounterExample::gradient(x, sample);
    for (float& v : g) v *= eta;
    const auto delta = codec.decode(codec.encode(g, layout, codec_rng).bytes, layout).value();
    x[0] -= delta[0];
    x[1] -= delta[1];
    if (sign_invariant) {
      EXPECT_NEAR(x[0] + x[1], 2.0f, 1e-5f) << "step " << t;
      EXPECT_GE(CounterExample::f(x), 2.0f - 1e-4f) << "step " << t;
    }
  }
  return x;
}

TEST(ErrorFeedback, SignSgdIsStuckWhereEfSignSgdAndSgdConverge) {
  constexpr float kEta = 1.0f / 128;
  constexpr int kSteps = 3000;
  // signSGD: every step is ±η[1,-1], so x1 + x2 = 2 forever and f >= 2.
  SignCodec sign(SignKind::kSign);
  const auto x_sign = run(sign, kSteps, kEta, true);
  EXPECT_GE(CounterExample::f(x_sign), 2.0f - 1e-4f);
  // EF-signSGD with C(v) = (‖v‖₁/d) sign(v) — the reference compressor — converges, like SGD.
  ErrorFeedback ef_sign(std::make_unique<SignCodec>(SignKind::kScaledSign, Granularity::kModel));
  const auto x_ef = run(ef_sign, kSteps, kEta, false);
  CastCodec sgd(FloatFormat::kFp32);
  const auto x_sgd = run(sgd, kSteps, kEta, false);
  EXPECT_LT(CounterExample::f(x_ef), 0.05f) << x_ef[0] << " " << x_ef[1];
  EXPECT_LT(CounterExample::f(x_sgd), 0.05f);
  // Without error feedback the scaled sign is also stuck on the same line.
  SignCodec scaled(SignKind::kScaledSign, Granularity::kModel);
  const auto x_scaled = run(scaled, kSteps, kEta, false);
  EXPECT_NEAR(x_scaled[0] + x_scaled[1], 2.0f, 1e-3f);
}

TEST(ErrorFeedback, MemoryIsWhatWasNotSent) {
  // e_T + Σ Δ_t = Σ g_t: error feedback loses nothing, it only delays it.
  const auto layout = testing::mixed_layout();
  ErrorFeedback ef(std::make_unique<TopKCodec>(SparseOptions{.k = 10}));
  Rng rng(1);
  std::vector<double> sent(layout.total_size(), 0.0), total(layout.total_size(), 0.0);
  for (int t = 0; t < 20; ++t) {
    const auto g = normal_values(layout.total_size(), 50 + t);
    const auto delta = ef.decode(ef.encode(g, layout, rng).bytes, layout).value();
    for (std::size_t i = 0; i < g.size(); ++i) {
      sent[i] += delta[i];
      total[i] += g[i];
    }
  }
  for (std::size_t i = 0; i < total.size(); ++i) {
    EXPECT_NEAR(ef.memory()[i] + sent[i], total[i], 1e-4) << i;
  }
}

// One non-finite gradient entry goes out in its round's message (non-finite scale: the aggregation
// rejects it) and is then forgotten: left in e it made every later message non-finite (a per-segment
// scale spreads it to the whole segment).
TEST(ErrorFeedback, ANonFiniteEntryLeavesTheMemoryAfterItsRound) {
  const auto layout = GradientLayout::whole(200);
  for (const char* spec : {"scaled_sign:ef=1", "onebit", "topk:ratio=0.1,ef=1", "sign:ef=1", "fp16:ef=1"}) {
    auto codec = make_codec(spec).value();
    Rng rng(3);
    auto g = normal_values(200, 5);
    g[17] = std::numeric_limits<float>::quiet_NaN();
    (void)codec->encode(g, layout, rng);
    const auto* feedback = dynamic_cast<const ErrorFeedback*>(codec.get());
    ASSERT_NE(feedback, nullptr) << spec;
    for (const float e : feedback->memory()) ASSERT_TRUE(std::isfinite(e)) << spec;
    for (int t = 0; t < 3; ++t) {
      const auto clean = normal_values(200, 6 + t);
      const auto decoded = codec->decode(codec->encode(clean, layout, rng).bytes, layout).value();
      for (const float v : decoded) ASSERT_TRUE(std::isfinite(v)) << spec << " round " << t;
    }
  }
}

// The registry refuses ef=1 over the unbiased codecs: over them the memory grows every round (here
// past 10^6 in 10 rounds over random-k, which the class itself still wraps), while over top-k it
// stays near the gradients' norm.
TEST(ErrorFeedback, TheRegistryRefusesItOverUnbiasedCodecs) {
  for (const char* spec : {"randomk:ratio=0.1,ef=1", "qsgd:s=16,ef=1", "terngrad:ef=1", "qsgd:elias=1,ef=1"}) {
    const auto made = make_codec(spec);
    ASSERT_FALSE(made.ok()) << spec;
    EXPECT_EQ(made.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(made.error().message.find("not contractive"), std::string::npos) << made.error().message;
  }
  const auto layout = GradientLayout::whole(10000);
  const auto memory_norm = [&](std::unique_ptr<Codec> inner) {
    ErrorFeedback ef(std::move(inner));
    Rng rng(9);
    for (int t = 0; t < 10; ++t) (void)ef.encode(normal_values(10000, 70 + t), layout, rng);
    double squared = 0;
    for (const float e : ef.memory()) squared += static_cast<double>(e) * e;
    return std::sqrt(squared);
  };
  EXPECT_GT(memory_norm(std::make_unique<RandomKCodec>(SparseOptions{.ratio = 0.1})), 1e6);
  EXPECT_LT(memory_norm(std::make_unique<TopKCodec>(SparseOptions{.ratio = 0.1})), 1e3);
}

TEST(ErrorFeedback, CheckpointRestoreContinuesTheSameTrajectory) {
  const auto layout = testing::mixed_layout();
  auto make = [] { return ErrorFeedback(std::make_unique<SignumCodec>(SignumOptions{0.9f})); };
  ErrorFeedback a = make();
  Rng rng(2);
  for (int t = 0; t < 5; ++t) (void)a.encode(normal_values(layout.total_size(), t), layout, rng);
  const auto checkpoint = a.save_state();
  ErrorFeedback b = make();
  ASSERT_TRUE(b.load_state(checkpoint, layout).ok());
  EXPECT_EQ(std::vector<float>(b.memory().begin(), b.memory().end()),
            std::vector<float>(a.memory().begin(), a.memory().end()));
  for (int t = 5; t < 10; ++t) {
    const auto g = normal_values(layout.total_size(), t);
    Rng ra(t), rb(t);
    ASSERT_EQ(a.encode(g, layout, ra).bytes, b.encode(g, layout, rb).bytes) << t;
  }
  // A restored node that lost its memory (what DeepSpeed users report) diverges.
  ErrorFeedback lost = make();
  ASSERT_TRUE(lost.inner().load_state(a.inner().save_state(), layout).ok());
  EXPECT_NE(lost.save_state(), a.save_state());
}

TEST(ErrorFeedback, MessagesAreTheInnerCodecs) {
  const auto layout = GradientLayout::whole(100);
  ErrorFeedback ef(std::make_unique<SignCodec>(SignKind::kScaledSign, Granularity::kModel));
  SignCodec plain(SignKind::kScaledSign, Granularity::kModel);
  Rng a(1), b(1);
  const auto g = normal_values(100, 1);
  // First step: memory is zero, so the message is the plain codec's.
  EXPECT_EQ(ef.encode(g, layout, a).bytes, plain.encode(g, layout, b).bytes);
  EXPECT_EQ(ef.wire_size(layout), plain.wire_size(layout));
  EXPECT_EQ(ef.spec(), "scaled_sign:granularity=model,ef=1");
}

}  // namespace
}  // namespace ballot::coding
