#include "learning/models.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "learning/dataset.h"

namespace ballot::learning {
namespace {

// Small shapes: 6×6 single-channel "images" (36 features), 4 classes, so that a full
// finite-difference sweep over every parameter stays fast under ASan.
constexpr ModelShape kShape{36, 4, 6, 6, 1};

struct Inputs {
  std::vector<float> x;
  std::vector<std::uint8_t> y;
};

Inputs random_inputs(std::size_t batch, std::uint64_t seed) {
  Rng rng(seed);
  Inputs in;
  for (std::size_t i = 0; i < batch * kShape.num_features; ++i) in.x.push_back(static_cast<float>(rng.normal()));
  for (std::size_t i = 0; i < batch; ++i)
    in.y.push_back(static_cast<std::uint8_t>(rng.uniform_int(kShape.num_classes)));
  return in;
}

std::unique_ptr<Model> build(const std::string& spec, std::uint64_t seed) {
  auto model = make_model(spec, kShape, seed);
  EXPECT_TRUE(model.ok()) << spec << ": " << model.error().to_string();
  return std::move(model).value();
}

class EveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModel, GradientMatchesCentralFiniteDifferences) {
  auto model = build(GetParam(), 3);
  const Inputs in = random_inputs(5, 8);
  model->forward_backward(in.x, in.y);
  const std::vector<float> analytic(model->gradients().begin(), model->gradients().end());
  auto params = model->parameters();
  // Per-layer relative error ‖g_fd − g‖ / ‖g‖ over every coordinate; float logits limit the
  // finite differences to ~1e-3 relative accuracy at this step size.
  const float eps = 2e-3f;
  for (std::size_t l = 0; l < model->layout().num_layers(); ++l) {
    const LayerSegment& seg = model->layout().layer(l);
    double diff = 0, norm = 0;
    for (std::size_t i = seg.offset; i < seg.offset + seg.size; ++i) {
      const float saved = params[i];
      params[i] = saved + eps;
      const double up = model->forward_backward(in.x, in.y);
      params[i] = saved - eps;
      const double down = model->forward_backward(in.x, in.y);
      params[i] = saved;
      const double fd = (up - down) / (2.0 * eps);
      diff += (fd - analytic[i]) * (fd - analytic[i]);
      norm += static_cast<double>(analytic[i]) * analytic[i];
    }
    ASSERT_GT(norm, 0.0) << seg.name;
    EXPECT_LT(std::sqrt(diff / norm), 2e-2) << GetParam() << " layer " << seg.name;
  }
}

TEST_P(EveryModel, IsDeterministicForASeedAndLaidOutAsOneBuffer) {
  auto a = build(GetParam(), 7), b = build(GetParam(), 7), c = build(GetParam(), 8);
  ASSERT_EQ(a->parameters().size(), a->layout().total_size());
  ASSERT_EQ(a->gradients().size(), a->layout().total_size());
  EXPECT_TRUE(std::equal(a->parameters().begin(), a->parameters().end(), b->parameters().begin()));
  EXPECT_FALSE(std::equal(a->parameters().begin(), a->parameters().end(), c->parameters().begin()));
  const Inputs in = random_inputs(9, 2);
  EXPECT_EQ(a->forward_backward(in.x, in.y), b->forward_backward(in.x, in.y));
  EXPECT_TRUE(std::equal(a->gradients().begin(), a->gradients().end(), b->gradients().begin()));
  // Initial weights lie in ±1/√fan_in: every layer is bounded by 1 and not all zero.
  for (const auto& seg : a->layout().layers()) {
    const auto w = a->layout().slice(std::span<const float>(a->parameters()), a->layout().find(seg.name).value());
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](float v) { return std::fabs(v) <= 1.0f; }));
    EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](float v) { return v != 0.0f; })) << seg.name;
  }
}

TEST_P(EveryModel, ForwardAgreesWithForwardBackwardAndCloneIsIndependent) {
  auto model = build(GetParam(), 5);
  const Inputs in = random_inputs(4, 3);
  std::vector<float> logits(4 * kShape.num_classes);
  model->forward(in.x, logits);
  EXPECT_NEAR(softmax_cross_entropy(logits, in.y, kShape.num_classes, {}), model->forward_backward(in.x, in.y), 1e-6);
  auto copy = model->clone();
  EXPECT_EQ(copy->spec(), model->spec());
  copy->parameters()[0] += 1.0f;
  EXPECT_NE(copy->parameters()[0], model->parameters()[0]);
  auto rebuilt = make_model(model->spec(), kShape, 5);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_TRUE(std::equal(model->parameters().begin(), model->parameters().end(), (*rebuilt)->parameters().begin()));
}

TEST_P(EveryModel, NonFiniteInputsGiveANonFiniteLossNotACrash) {
  auto model = build(GetParam(), 5);
  Inputs in = random_inputs(3, 4);
  in.x[1] = std::numeric_limits<float>::quiet_NaN();
  in.x[40] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite(model->forward_backward(in.x, in.y)));
}

// Max pooling keeps a NaN wherever it lies in its window, as torch's max_pool2d does (a NaN at the
// second position of a window was dropped, and the loss came out finite).
TEST(Models, MaxPoolingKeepsANaNAnywhereInItsWindow) {
  for (std::size_t pixel : {0u, 1u, 6u, 7u}) {  // the four positions of the first 2×2 window
    auto model = build("cnn:c1=2,c2=3,k=1", 5);
    Inputs in = random_inputs(2, 4);
    in.x[pixel] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(std::isfinite(model->forward_backward(in.x, in.y))) << "NaN at pixel " << pixel;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EveryModel,
                         ::testing::Values("logreg", "mlp:hidden=8", "mlp:hidden=7/5", "cnn:c1=2,c2=3,k=3"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(Models, LayoutsNameEveryTensorInOrder) {
  auto mlp = build("mlp:hidden=8", 1);
  ASSERT_EQ(mlp->layout().num_layers(), 4u);
  EXPECT_EQ(mlp->layout().layer(0).name, "fc1.weight");
  EXPECT_EQ(mlp->layout().layer(0).size, 8u * 36u);
  EXPECT_EQ(mlp->layout().layer(3).name, "fc2.bias");
  EXPECT_EQ(mlp->layout().total_size(), 36u * 8 + 8 + 8 * 4 + 4);
  auto cnn = build("cnn:c1=2,c2=3,k=3", 1);
  EXPECT_EQ(cnn->layout().layer(0).name, "conv1.weight");
  EXPECT_EQ(cnn->layout().layer(0).size, 2u * 1 * 3 * 3);
  EXPECT_EQ(cnn->layout().layer(2).size, 3u * 2 * 3 * 3);
  EXPECT_EQ(cnn->layout().layer(4).name, "fc.weight");
  EXPECT_EQ(cnn->layout().layer(4).size, 4u * (1 * 1 * 3));  // 6 → pool 3 → pool 1
  auto fashion = make_model("cnn", ModelShape{}, 1);         // 28×28: 28 → 14 → 7
  ASSERT_TRUE(fashion.ok());
  EXPECT_EQ((*fashion)->layout().layer(4).size, 10u * 7 * 7 * 16);
  auto mlp784 = make_model("mlp", ModelShape{}, 1);
  ASSERT_TRUE(mlp784.ok());
  EXPECT_EQ((*mlp784)->layout().total_size(), 784u * 128 + 128 + 128 * 10 + 10);
}

TEST(Models, RegistryRejectsBadSpecs) {
  for (const char* spec :
       {"resnet", "mlp:hidden=", "mlp:hidden=0", "mlp:hidden=8/x", "mlp:width=8", "cnn:k=4", "cnn:c1=0", "logreg:x=1",
        "cnn:k=99", "synthetic:d=0", "synthetic:d=-5", "synthetic:width=3"}) {
    auto m = make_model(spec, kShape, 1);
    EXPECT_FALSE(m.ok()) << spec;
    if (!m.ok()) {
      EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument) << spec;
    }
  }
  ModelShape flat{10, 3, 0, 0, 0};
  EXPECT_FALSE(make_model("cnn", flat, 1).ok());
  EXPECT_TRUE(make_model("mlp", flat, 1).ok());
  EXPECT_FALSE(make_model("mlp", ModelShape{10, 1, 0, 0, 0}, 1).ok());
}

// The communication benchmarks' model: d parameters, gradient x − (mean input), zero logits,
// rebuilt from its spec, deterministic for a seed.
TEST(Models, SyntheticGradientIsOnePassOverTheParameters) {
  auto model = build("synthetic:d=1000", 3);
  EXPECT_EQ(model->spec(), "synthetic:d=1000");
  ASSERT_EQ(model->parameters().size(), 1000u);
  EXPECT_EQ(build(model->spec(), 3)->parameters()[999], model->parameters()[999]);
  const auto in = random_inputs(4, 9);
  double sum = 0.0;
  for (float v : in.x) sum += v;
  const float c = static_cast<float>(sum / static_cast<double>(in.x.size()));
  const double loss = model->forward_backward(in.x, in.y);
  EXPECT_DOUBLE_EQ(loss, static_cast<double>(c) * c);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(model->gradients()[i], model->parameters()[i] - c) << i;
  std::vector<float> logits(4 * kShape.num_classes, 1.0f);
  model->forward(in.x, logits);
  for (float v : logits) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace ballot::learning
