#include "learning/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/enforce.h"
#include "core/rng.h"
#include "kernels/momentum.h"
#include "kernels/sign_kernels.h"
#include "kernels/update_logic.h"
#include "learning/dataset.h"
#include "learning/models.h"

namespace ballot::learning {
namespace {

std::vector<float> random_vector(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

BitVector random_vote(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  BitVector v(n);
  for (std::size_t i = 0; i < n; ++i) v.set(i, rng.bernoulli(0.5));
  return v;
}

// ---- sgd ------------------------------------------------------------------------------------

class SgdFormula : public ::testing::TestWithParam<SgdOptions> {};

TEST_P(SgdFormula, MatchesTheReferenceFormulaOverSeveralSteps) {
  const SgdOptions o = GetParam();
  auto opt = make_sgd(o);
  std::vector<float> x = random_vector(70, 1), ref = x, buf(70, 0.0f);
  for (int step = 0; step < 4; ++step) {
    const auto g = random_vector(70, 10 + step);
    const double lr = 0.1 / (step + 1);
    opt->step(x, g, lr);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const float d = g[i] + static_cast<float>(o.weight_decay) * ref[i];
      float dir = d;
      if (o.momentum != 0.0) {
        buf[i] = step == 0 ? d : static_cast<float>(o.momentum) * buf[i] + static_cast<float>(1.0 - o.dampening) * d;
        dir = o.nesterov ? d + static_cast<float>(o.momentum) * buf[i] : buf[i];
      }
      ref[i] -= static_cast<float>(lr) * dir;
    }
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], ref[i], 1e-6f) << "step " << step << " i " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Options, SgdFormula,
                         ::testing::Values(SgdOptions{}, SgdOptions{0.0, 0.01, 0.0, false},
                                           SgdOptions{0.9, 0.0, 0.0, false}, SgdOptions{0.9, 1e-4, 0.0, false},
                                           SgdOptions{0.5, 0.0, 0.3, false}, SgdOptions{0.9, 1e-3, 0.0, true}));

TEST(HeavyBall, IsSgdWithThePaperDefaultsFedWithTheVote) {
  auto opt = make_optimizer("heavyball", GradientLayout::whole(130));
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->spec(), "heavyball:momentum=0.9,wd=1e-04,dampening=0,nesterov=false");
  auto reference = make_sgd(kHeavyBallVoteOptions);
  std::vector<float> x = random_vector(130, 2), y = x;
  for (int step = 0; step < 3; ++step) {
    const BitVector vote = random_vote(130, 20 + step);
    std::vector<float> unpacked(130);
    for (std::size_t i = 0; i < 130; ++i) unpacked[i] = static_cast<float>(vote.sign(i));
    (*opt)->step_vote(x, vote, 1e-2);
    reference->step(y, unpacked, 1e-2);
  }
  EXPECT_EQ(x, y);
}

// The sgd view is what a copy of the rule elsewhere needs: with its options, the started flag and
// the buffer, the kernels' step (momentum_sgd_step, the GPU kernel's twin) gives the rule's bits.
TEST(SgdView, OptionsStartedAndBufferReproduceTheRule) {
  auto rule = make_optimizer("heavyball:momentum=0.8,wd=0.01,dampening=0.1", GradientLayout::whole(100)).value();
  auto view = rule->sgd_view();
  ASSERT_TRUE(view.has_value());
  EXPECT_FALSE(view->started);
  EXPECT_TRUE(view->buffer.empty());
  EXPECT_EQ(view->options->momentum, 0.8);
  EXPECT_EQ(view->options->dampening, 0.1);
  std::vector<float> x = random_vector(100, 3), copy = x, buffer(100);
  bool started = false;
  for (int step = 0; step < 3; ++step) {
    const BitVector vote = random_vote(100, 40 + step);
    const StepScale scale{0.05f, 0.01f};
    rule->step_vote(x, vote, scale);
    const kernels::SgdFactors factors{scale.lr, scale.weight_decay, 0.8f, static_cast<float>(1.0 - 0.1), false};
    for (std::size_t i = 0; i < 100; ++i) {
      kernels::momentum_sgd_step(copy[i], buffer[i], static_cast<float>(vote.sign(i)), factors, !started);
    }
    started = true;
    view = rule->sgd_view();
    ASSERT_TRUE(view->started);
    EXPECT_TRUE(std::equal(buffer.begin(), buffer.end(), view->buffer.begin(), view->buffer.end()));
  }
  EXPECT_EQ(x, copy);
  for (const char* other : {"sign", "signum", "ef_sign"}) {
    EXPECT_FALSE(make_optimizer(other, GradientLayout::whole(10)).value()->sgd_view().has_value()) << other;
  }
}

// The signum view: with its β and momentum, the worker momentum's formula on the unpacked vote and
// the sign rule on the new momentum's signs (what ballot.torch runs on a GPU) give the rule's bits.
TEST(SignumView, BetaAndMomentumReproduceTheRule) {
  auto rule = make_optimizer("signum:beta=0.8,wd=0.01", GradientLayout::whole(100)).value();
  auto view = rule->signum_view();
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->options->beta, 0.8);
  EXPECT_TRUE(view->momentum.empty());
  std::vector<float> x = random_vector(100, 5), copy = x;
  WorkerMomentum momentum(view->options->beta);
  for (int step = 0; step < 3; ++step) {
    const BitVector vote = random_vote(100, 60 + step);
    const StepScale scale{0.05f, 0.01f};
    rule->step_vote(x, vote, scale);
    std::vector<float> unpacked(100);
    for (std::size_t i = 0; i < 100; ++i) unpacked[i] = static_cast<float>(vote.sign(i));
    BitVector signs;
    momentum.update(unpacked, signs);
    make_sign_update({})->step_vote(copy, signs, scale);
    view = rule->signum_view();
    EXPECT_TRUE(std::equal(momentum.momentum().begin(), momentum.momentum().end(), view->momentum.begin(),
                           view->momentum.end()));
  }
  EXPECT_EQ(x, copy);
  for (const char* other : {"sign", "sgd", "heavyball", "ef_sign"}) {
    EXPECT_FALSE(make_optimizer(other, GradientLayout::whole(10)).value()->signum_view().has_value()) << other;
  }
}

// ---- the step's scale ------------------------------------------------------------------------

// A cluster's decision carries η and λ as float bits (runtime/messages.h): a rule applies the
// scale it is given, its own λ only through scale(lr).
TEST(StepScale, TheGivenScaleIsWhatTheRuleApplies) {
  for (const char* spec : {"sign:wd=0.01", "sgd:momentum=0.9,wd=0.01", "heavyball", "signum:beta=0.9,wd=0.01"}) {
    auto rule = make_optimizer(spec, GradientLayout::whole(70)).value();
    EXPECT_EQ(rule->scale(0.25), (StepScale{0.25f, rule->weight_decay()})) << spec;
    auto plain = make_optimizer(spec, GradientLayout::whole(70)).value();
    auto scaled = make_optimizer(spec, GradientLayout::whole(70)).value();
    auto undecayed = make_optimizer(spec, GradientLayout::whole(70)).value();
    std::vector<float> a = random_vector(70, 5), b = a, c = a;
    const BitVector vote = random_vote(70, 6);
    plain->step_vote(a, vote, 0.25);
    scaled->step_vote(b, vote, StepScale{0.25f, rule->weight_decay()});
    undecayed->step_vote(c, vote, StepScale{0.25f, 0.0f});
    EXPECT_EQ(a, b) << spec;
    EXPECT_NE(a, c) << spec;  // λ = 0.01 (heavyball: 1e-4) changed something
  }
  EXPECT_EQ(make_optimizer("ef_sign", GradientLayout::whole(4)).value()->weight_decay(), 0.0f);
}

// ---- sign rules ------------------------------------------------------------------------------

class SignSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SignSizes, VoteUpdateIsExactlyXMinusLrTimesVotePlusDecay) {
  const std::size_t n = GetParam();
  auto opt = make_sign_update({1e-2});
  std::vector<float> x = random_vector(n, 3), expected = x;
  const BitVector vote = random_vote(n, 4);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = vote.get(i) ? 1.0f : -1.0f;
    expected[i] = expected[i] - 0.5f * (v + 0.01f * expected[i]);
  }
  opt->step_vote(x, vote, 0.5);
  EXPECT_EQ(x, expected);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SignSizes, ::testing::Values(0, 1, 63, 64, 65, 130, 1000));

TEST(SignUpdate, TakesTheSignOfAFloatDirectionWithZeroAndNaNAsPlusOne) {
  auto opt = make_sign_update();
  std::vector<float> x(5, 0.0f);
  const std::vector<float> g = {2.0f, -3.0f, 0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN()};
  opt->step(x, g, 0.25);
  EXPECT_EQ(x, (std::vector<float>{-0.25f, 0.25f, -0.25f, -0.25f, -0.25f}));
}

TEST(WorkerMomentum, KeepsTheMomentumAndSendsItsSign) {
  WorkerMomentum worker(0.9);
  BitVector signs;
  const std::vector<float> g1 = {1.0f, -1.0f, 0.0f}, g2 = {-2.0f, 0.05f, 0.0f};
  worker.update(g1, signs);
  EXPECT_EQ(signs.size(), 3u);
  EXPECT_TRUE(signs.get(0));
  EXPECT_FALSE(signs.get(1));
  EXPECT_TRUE(signs.get(2));
  worker.update(g2, signs);
  // m = 0.9·0.1 + 0.1·(−2) = −0.11; 0.9·(−0.1) + 0.1·0.05 = −0.085.
  EXPECT_NEAR(worker.momentum()[0], -0.11f, 1e-7);
  EXPECT_NEAR(worker.momentum()[1], -0.085f, 1e-7);
  EXPECT_FALSE(signs.get(0));
  EXPECT_FALSE(signs.get(1));
  EXPECT_TRUE(signs.padding_is_clear());
  WorkerMomentum restored(0.9);
  ASSERT_TRUE(restored.load_state(worker.save_state(), 3).ok());
  EXPECT_TRUE(std::equal(worker.momentum().begin(), worker.momentum().end(), restored.momentum().begin()));
  EXPECT_FALSE(restored.load_state(worker.save_state(), 4).ok());
}

// A piece that does not start at a multiple of 64 is refused before the momentum moves.
TEST(WorkerMomentum, ARefusedPieceLeavesTheMomentumAsItWas) {
  WorkerMomentum worker(0.9);
  BitVector signs;
  const std::vector<float> piece(20, 2.0f);
  EXPECT_THROW(worker.update_range(100, 10, piece, signs), EnforceError);
  EXPECT_THROW(worker.update_range(100, 64, std::vector<float>(20, 2.0f), signs), EnforceError);  // ends at 84
  for (float m : worker.momentum()) ASSERT_EQ(m, 0.0f);
  worker.update_range(100, 64, std::vector<float>(36, 2.0f), signs);
  EXPECT_FLOAT_EQ(worker.momentum()[64], 0.2f);
  EXPECT_EQ(worker.momentum()[10], 0.0f);
}

// The one momentum formula and the one sign packer: WorkerMomentum is kernels::signum_momentum
// followed by kernels::pack_signs, bit for bit, on boundary sizes.
TEST(WorkerMomentum, IsTheKernelsMomentumThenTheKernelsPacker) {
  for (std::size_t n : {0u, 1u, 63u, 64u, 65u, 200u}) {
    WorkerMomentum worker(0.9);
    std::vector<float> expected(n, 0.0f);
    BitVector bits(3, true), expected_bits;
    for (std::uint64_t step = 0; step < 3; ++step) {
      const auto g = random_vector(n, 10 * n + step);
      worker.update(g, bits);
      kernels::signum_momentum(expected, g, 0.9);
      kernels::pack_signs(expected, expected_bits);
      ASSERT_EQ(bits.size(), n);
      EXPECT_TRUE(bits.padding_is_clear());
      EXPECT_EQ(bits, expected_bits) << n;
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), worker.momentum().begin(), worker.momentum().end()))
          << n;
    }
  }
}

TEST(Signum, OneProcessEqualsWorkerMomentumThenTheSignUpdate) {
  auto signum = make_signum({0.9, 1e-3});
  auto server = make_sign_update({1e-3});
  WorkerMomentum worker(0.9);
  std::vector<float> x = random_vector(100, 5), y = x;
  BitVector signs;
  for (int step = 0; step < 5; ++step) {
    const auto g = random_vector(100, 50 + step);
    signum->step(x, g, 0.01);
    worker.update(g, signs);
    server->step_vote(y, signs, 0.01);
  }
  EXPECT_EQ(x, y);
}

// ---- EF-signSGD: the counter-example of Karimireddy et al. 2019 (ALGORITHMS.md §2) ------------

double counter_example_f(const std::vector<float>& x) {
  const double a1 = 1.5 * x[0] - 0.5 * x[1], a2 = -0.5 * x[0] + 1.5 * x[1];
  return a1 * a1 + a2 * a2;
}

double run_counter_example(Optimizer& opt, int steps) {
  std::vector<float> x = {1.0f, 1.0f};
  Rng rng(17);
  const float a[2][2] = {{1.5f, -0.5f}, {-0.5f, 1.5f}};
  for (int t = 0; t < steps; ++t) {
    const auto i = rng.uniform_int(2);
    const float dot = a[i][0] * x[0] + a[i][1] * x[1];
    const std::vector<float> g = {2 * dot * a[i][0], 2 * dot * a[i][1]};
    opt.step(x, g, 0.05 / std::sqrt(1.0 + t / 10.0));
  }
  return counter_example_f(x);
}

TEST(EfSign, ConvergesWhereSignSgdIsStuck) {
  auto sign = make_sign_update();
  auto ef = make_ef_sign(GradientLayout::whole(2));
  auto sgd = make_sgd();
  EXPECT_GE(run_counter_example(*sign, 2000), 2.0 - 1e-4);  // x₁ + x₂ never changes: f ≥ 2
  EXPECT_LT(run_counter_example(*ef, 2000), 0.05);
  EXPECT_LT(run_counter_example(*sgd, 2000), 0.05);
}

TEST(EfSign, AppliesPerLayerScaledSignsAndKeepsTheResidual) {
  auto layout = GradientLayout::from_sizes({{"a", 2}, {"b", 1}});
  ASSERT_TRUE(layout.ok());
  auto ef = make_ef_sign(*layout);
  std::vector<float> x = {0.0f, 0.0f, 0.0f};
  ef->step(x, std::vector<float>{3.0f, -1.0f, -5.0f}, 1.0);
  // Layer a: p = [3, −1], scale 2, Δ = [2, −2], e = [1, 1]. Layer b: Δ = −5, e = 0.
  EXPECT_EQ(x, (std::vector<float>{-2.0f, 2.0f, 5.0f}));
  ef->step(x, std::vector<float>{0.0f, 0.0f, 0.0f}, 1.0);  // p = e = [1, 1] → Δ = [1, 1]
  EXPECT_EQ(x, (std::vector<float>{-3.0f, 1.0f, 5.0f}));
}

// A copy elsewhere (ballot.torch on a GPU) applies the same step from the vote, the error memory
// and the per-layer scales the view gives: the view describes the last step exactly.
TEST(EfSign, ViewGivesTheLayoutTheMemoryAndTheLastStepsScales) {
  auto layout = GradientLayout::from_sizes({{"a", 2}, {"b", 1}});
  ASSERT_TRUE(layout.ok());
  auto ef = make_ef_sign(*layout);
  ASSERT_TRUE(ef->ef_sign_view().has_value());
  EXPECT_FALSE(make_sgd()->ef_sign_view().has_value());
  EXPECT_TRUE(ef->ef_sign_view()->error.empty());
  EXPECT_TRUE(ef->ef_sign_view()->scales.empty());
  std::vector<float> x = {0.0f, 0.0f, 0.0f};
  ef->step(x, std::vector<float>{3.0f, -1.0f, -5.0f}, 1.0);
  auto view = ef->ef_sign_view();
  EXPECT_EQ(view->layout->num_layers(), 2u);
  EXPECT_EQ(std::vector<float>(view->scales.begin(), view->scales.end()), (std::vector<float>{2.0f, 5.0f}));
  EXPECT_EQ(std::vector<float>(view->error.begin(), view->error.end()), (std::vector<float>{1.0f, 1.0f, 0.0f}));
  // The step again from the view, as the copy computes it: p = e + lr·g, x − s·sign(p).
  const std::vector<float> g = {1.0f, -1.0f, 1.0f};
  std::vector<float> p(view->error.begin(), view->error.end());
  for (std::size_t i = 0; i < 3; ++i) p[i] = p[i] + 0.5f * g[i];
  std::vector<float> copy = x;
  ef->step(x, g, 0.5);
  view = ef->ef_sign_view();
  const std::size_t layer_of[] = {0, 0, 1};
  for (std::size_t i = 0; i < 3; ++i) {
    const float delta = view->scales[layer_of[i]] * (p[i] < 0.0f ? -1.0f : 1.0f);
    EXPECT_EQ(copy[i] - delta, x[i]) << i;
    EXPECT_EQ(p[i] - delta, view->error[i]) << i;
  }
  ef->reset_state();
  EXPECT_TRUE(ef->ef_sign_view()->scales.empty());
}

// ---- state bytes ----------------------------------------------------------------------------

class EveryRule : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryRule, StateRoundTripsSoThatRestoredReplicasStayIdentical) {
  const auto layout = GradientLayout::whole(77);
  auto a = make_optimizer(GetParam(), layout), b = make_optimizer(GetParam(), layout);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->spec(), make_optimizer((*a)->spec(), layout).value()->spec());
  std::vector<float> x = random_vector(77, 6);
  for (int step = 0; step < 3; ++step) (*a)->step(x, random_vector(77, 60 + step), 0.01);
  const auto bytes = (*a)->save_state();
  ASSERT_TRUE((*b)->load_state(bytes, 77).ok());
  EXPECT_EQ((*b)->save_state(), bytes);
  std::vector<float> y = x;
  const auto g = random_vector(77, 99);
  (*a)->step(x, g, 0.01);
  (*b)->step(y, g, 0.01);
  EXPECT_EQ(x, y);
}

TEST_P(EveryRule, MalformedStateIsRejectedAndLeavesTheStateUnchanged) {
  const auto layout = GradientLayout::whole(10);
  auto opt = make_optimizer(GetParam(), layout);
  ASSERT_TRUE(opt.ok());
  std::vector<float> x(10, 1.0f);
  (*opt)->step(x, random_vector(10, 1), 0.1);
  const auto good = (*opt)->save_state();
  auto mutate = [&](std::size_t at, std::uint8_t value) {
    auto b = good;
    b[at] = value;
    return b;
  };
  std::vector<std::vector<std::uint8_t>> bad = {
      {},
      std::vector<std::uint8_t>(good.begin(), good.begin() + 8),
      mutate(0, 'X'),   // magic
      mutate(4, 2),     // version
      mutate(5, 0x77),  // rule
      mutate(6, 0x80),  // unknown flag
      mutate(8, 11),    // count for another model
  };
  auto longer = good;
  longer.push_back(0);
  bad.push_back(longer);
  if (good.size() > 16) bad.emplace_back(good.begin(), good.end() - 4);
  for (std::size_t k = 0; k < bad.size(); ++k) {
    auto status = (*opt)->load_state(bad[k], 10);
    ASSERT_FALSE(status.ok()) << GetParam() << " case " << k;
    EXPECT_EQ(status.error().code, ErrorCode::kMalformed) << status.error().to_string();
    EXPECT_EQ((*opt)->save_state(), good) << "case " << k;
  }
  // A buffer sized for another model is refused; stateless rules (no values) fit any size.
  EXPECT_EQ((*opt)->load_state(good, 11).ok(), good.size() == 16);
}

INSTANTIATE_TEST_SUITE_P(Rules, EveryRule,
                         ::testing::Values("sgd", "sgd:momentum=0.9,wd=0.001", "heavyball", "sign:wd=0.0001",
                                           "signum:beta=0.8", "ef_sign"));

TEST(MakeOptimizer, RejectsUnknownRulesAndOutOfRangeOptions) {
  const auto layout = GradientLayout::whole(4);
  for (const char* spec : {"adam", "sgd:momentum=1", "sgd:momentum=-0.1", "sgd:wd=-1", "sgd:lr=1", "sign:wd=nan",
                           "signum:beta=1.5", "sgd:nesterov=true", "ef_sign:x=1",
                           // 0 in float32, where the update computes: it would run as plain SGD.
                           "sgd:momentum=1e-50", "sgd:momentum=1e-50,nesterov=true"}) {
    auto opt = make_optimizer(spec, layout);
    EXPECT_FALSE(opt.ok()) << spec;
  }
  EXPECT_FALSE(make_optimizer("ef_sign", GradientLayout{}).ok());
}

// ---- schedules -----------------------------------------------------------------------------------

TEST(LrSchedule, FactorsFollowTheirFormulasAndCompose) {
  EXPECT_DOUBLE_EQ(LrSchedule(0.1).at(12345), 0.1);
  LrSchedule warm(1.0);
  warm.warmup(10, 0.1);
  EXPECT_DOUBLE_EQ(warm.at(0), 0.1);
  EXPECT_DOUBLE_EQ(warm.at(5), 0.55);
  EXPECT_DOUBLE_EQ(warm.at(10), 1.0);
  LrSchedule steps(1.0);
  steps.step({100, 200}, 0.1);
  EXPECT_DOUBLE_EQ(steps.at(99), 1.0);
  EXPECT_DOUBLE_EQ(steps.at(100), 0.1);
  EXPECT_NEAR(steps.at(250), 0.01, 1e-15);
  LrSchedule cosine(2.0);
  cosine.cosine(100, 0.1);
  EXPECT_DOUBLE_EQ(cosine.at(0), 2.0);
  EXPECT_NEAR(cosine.at(50), 2.0 * (0.1 + 0.9 * 0.5), 1e-12);
  EXPECT_NEAR(cosine.at(100), 0.2, 1e-12);
  EXPECT_NEAR(cosine.at(1000), 0.2, 1e-12);
  LrSchedule both(1.0);
  both.warmup(10, 0.0).cosine(100, 0.0);
  EXPECT_NEAR(both.at(5), 0.5 * 0.5 * (1 + std::cos(std::numbers::pi * 0.05)), 1e-12);
}

TEST(LrSchedule, ParsesItsOwnSpecAndRejectsBadText) {
  auto s = LrSchedule::parse(
      "constant:lr=0.01 > warmup:rounds=100,start=0.1 > step:at=1000/2000,gamma=0.5 > cosine:rounds=3000");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto again = LrSchedule::parse(s->spec());
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  for (std::uint64_t r : {0u, 50u, 100u, 999u, 1000u, 2500u, 3000u, 5000u})
    EXPECT_DOUBLE_EQ(s->at(r), again->at(r)) << r;
  for (const char* bad :
       {"", "warmup:rounds=3", "constant:lr=0", "constant:lr=-1", "constant:lr=0.1 > warmup",
        "constant:lr=0.1 > step:at=5/3", "constant:lr=0.1 > step:at=a", "constant:lr=0.1 > cosine:rounds=10,min=2",
        "constant:lr=0.1 > linear:rounds=3", "constant:lr=0.1,x=2",
        // every replica applies the rate as a float32: beyond it (inf, or 0 after rounding) or
        // reaching beyond it through the steps' gamma
        "constant:lr=1e39", "constant:lr=1e-46", "constant:lr=0.1 > step:at=1/2,gamma=1e300",
        "constant:lr=1e38 > step:at=5,gamma=10", "constant:lr=0.1 > step:at=2/2"}) {
    EXPECT_FALSE(LrSchedule::parse(bad).ok()) << bad;
  }
  EXPECT_TRUE(LrSchedule::parse("constant:lr=1e37 > step:at=5,gamma=10").ok());
  EXPECT_TRUE(LrSchedule::parse("constant:lr=1e-37 > step:at=5/6,gamma=0.001").ok());  // only the peak is bounded
  LrSchedule repeated(1.0);
  EXPECT_THROW(repeated.step({2, 2}, 0.5), EnforceError);  // its spec() would not parse
}

// ---- training: the rules really train the MLP -----------------------------------------------

struct TrainingSetup {
  Dataset train, test;
};

TrainingSetup gaussian_clusters() {
  SyntheticOptions o;
  o.num_examples = 2000;
  o.num_features = 20;
  o.num_classes = 4;
  o.separation = 0.6;
  o.seed = 21;
  return {make_synthetic(o).value(), make_synthetic_test(o, 1000).value()};
}

TEST(Training, SgdTrainsTheMlpOnSyntheticData) {
  const auto data = gaussian_clusters();
  auto model = make_mlp({20, {16}, 4}, 1).value();
  const double before = evaluate(*model, data.test).accuracy;
  auto opt = make_sgd({0.9, 1e-4, 0.0, false});
  PartitionSampler sampler({3, 32}, data.train.size());
  Batch batch;
  for (std::uint64_t r = 0; r < 300; ++r) {
    gather(data.train, sampler.indices(r, 0), batch);
    model->forward_backward(batch.features, batch.labels);
    opt->step(model->parameters(), model->gradients(), 0.05);
  }
  const double after = evaluate(*model, data.test).accuracy;
  EXPECT_LT(before, 0.5);
  EXPECT_GT(after, 0.85) << "chance is 0.25";
}

TEST(Training, SignMajorityVoteOverWorkersTrainsTheMlp) {
  // signSGD with majority vote (Bernstein et al. 2019): 5 workers with their own partition and
  // worker momentum (Signum), the server votes and applies x ← x − η(v + λx).
  const auto data = gaussian_clusters();
  auto model = make_mlp({20, {16}, 4}, 1).value();
  auto server = make_sign_update({1e-4});
  constexpr std::size_t kWorkers = 5;
  std::vector<WorkerMomentum> workers(kWorkers, WorkerMomentum(0.9));
  PartitionSampler sampler({4, 16}, data.train.size());
  LrSchedule lr(3e-3);
  lr.cosine(300, 0.1);
  Batch batch;
  std::vector<BitVector> signs(kWorkers);
  const std::size_t d = model->parameters().size();
  for (std::uint64_t r = 0; r < 300; ++r) {
    for (std::size_t w = 0; w < kWorkers; ++w) {
      gather(data.train, sampler.indices(r, w), batch);
      model->forward_backward(batch.features, batch.labels);
      workers[w].update(model->gradients(), signs[w]);
    }
    BitVector vote(d);
    for (std::size_t i = 0; i < d; ++i) {
      std::size_t ones = 0;
      for (const auto& s : signs) ones += s.get(i) ? 1 : 0;
      vote.set(i, 2 * ones >= kWorkers);
    }
    server->step_vote(model->parameters(), vote, lr.at(r));
  }
  EXPECT_GT(evaluate(*model, data.test).accuracy, 0.85) << "chance is 0.25";
}

// Every line of the update-rule table: its example builds, the built rule's spec() rebuilds the
// same rule, a step moves the parameters, and it has a default learning rate.
TEST(UpdateRuleTable, EveryEntryBuildsStepsAndHasADefaultRate) {
  const auto layout = GradientLayout::whole(8);
  std::set<std::string_view> names;
  for (const auto& entry : update_rule_table()) {
    SCOPED_TRACE(std::string(entry.name));
    EXPECT_TRUE(names.insert(entry.name).second) << "duplicate name";
    EXPECT_FALSE(entry.summary.empty());
    auto rule = make_optimizer(entry.example, layout);
    ASSERT_TRUE(rule.ok()) << rule.error().to_string();
    auto again = make_optimizer((*rule)->spec(), layout);
    ASSERT_TRUE(again.ok()) << (*rule)->spec();
    EXPECT_EQ((*again)->spec(), (*rule)->spec());
    std::vector<float> params(8, 1.0f);
    const std::vector<float> direction{1, -1, 2, -2, 0.5f, -0.5f, 3, -3};
    (*rule)->step(params, direction, 0.1);
    EXPECT_NE(params, std::vector<float>(8, 1.0f));
    const auto lr = default_learning_rate(entry.name);
    ASSERT_TRUE(lr.ok());
    EXPECT_EQ(*lr, entry.properties.learning_rate);
    EXPECT_GT(*lr, 0.0);
    for (const auto& key : key_set(entry.keys)) EXPECT_TRUE(has_key(entry.keys, key));
  }
  const auto unknown = make_optimizer("adam", layout);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("known: sgd, heavyball, sign, signum, ef_sign"), std::string::npos);
  EXPECT_FALSE(default_learning_rate("adam").ok());
  // A key the rule lacks is refused as make_optimizer refuses it, not read past.
  const auto foreign = default_learning_rate("sign:momentum=0.9");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("momentum"), std::string::npos) << foreign.error().message;
  EXPECT_EQ(*default_learning_rate("sgd:momentum=0.9"), *default_learning_rate("sgd:momentum=0.5"));
}

TEST(UpdateRuleTable, DocsListEveryRule) {
  std::ifstream file(std::string(BALLOT_SOURCE_DIR) + "/docs/learning.md");
  ASSERT_TRUE(file.good());
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (const auto& entry : update_rule_table()) {
    EXPECT_NE(text.find("| `" + std::string(entry.name)), std::string::npos)
        << "docs/learning.md has no table row for update rule " << entry.name;
  }
}

}  // namespace
}  // namespace ballot::learning
