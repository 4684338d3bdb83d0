#include "learning/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "learning/dataset.h"
#include "learning/models.h"

namespace ballot::learning {
namespace {

TEST(SoftmaxCrossEntropy, UniformLogitsCostLogClassesAndGradientsSumToZero) {
  const std::vector<float> logits(3 * 4, 0.5f);
  const std::vector<std::uint8_t> labels = {0, 3, 2};
  std::vector<float> grad(logits.size());
  EXPECT_NEAR(softmax_cross_entropy(logits, labels, 4, grad), std::log(4.0), 1e-6);
  for (std::size_t i = 0; i < 3; ++i) {
    double row = 0;
    for (std::size_t c = 0; c < 4; ++c) {
      const double expected = (0.25 - (c == labels[i] ? 1.0 : 0.0)) / 3.0;
      EXPECT_NEAR(grad[i * 4 + c], expected, 1e-7);
      row += grad[i * 4 + c];
    }
    EXPECT_NEAR(row, 0.0, 1e-7);
  }
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  std::vector<float> logits = {1.0f, -2.0f, 0.3f, 4.0f, 0.0f, -1.0f};
  const std::vector<std::uint8_t> labels = {2, 0};
  std::vector<float> grad(logits.size());
  softmax_cross_entropy(logits, labels, 3, grad);
  for (std::size_t k = 0; k < logits.size(); ++k) {
    auto plus = logits, minus = logits;
    plus[k] += 1e-3f;
    minus[k] -= 1e-3f;
    const double fd = (softmax_cross_entropy(plus, labels, 3, {}) - softmax_cross_entropy(minus, labels, 3, {})) / 2e-3;
    EXPECT_NEAR(grad[k], fd, 1e-4) << k;
  }
}

TEST(SoftmaxCrossEntropy, IsStableForHugeLogitsAndSurvivesNaN) {
  const std::vector<float> logits = {1000.0f, -1000.0f, 0.0f};
  const std::vector<std::uint8_t> wrong = {1}, right = {0};
  EXPECT_NEAR(softmax_cross_entropy(logits, right, 3, {}), 0.0, 1e-9);
  EXPECT_NEAR(softmax_cross_entropy(logits, wrong, 3, {}), 2000.0, 1e-3);
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 0.0f, 1.0f};
  std::vector<float> grad(3);
  EXPECT_TRUE(std::isnan(softmax_cross_entropy(nan, right, 3, grad)));
}

TEST(Evaluate, CountsArgMaxHitsAndMeanLossOverBatches) {
  // One-hot inputs and an identity logistic regression: class = hot feature, except where the
  // label disagrees on purpose.
  Dataset data;
  data.num_features = 3;
  data.num_classes = 3;
  for (int i = 0; i < 7; ++i) {
    for (int f = 0; f < 3; ++f) data.features.push_back(f == i % 3 ? 1.0f : 0.0f);
    data.labels.push_back(static_cast<std::uint8_t>(i == 6 ? 1 : i % 3));
  }
  auto model = make_logistic_regression({3, 3}, 1);
  ASSERT_TRUE(model.ok());
  auto params = (*model)->parameters();
  std::fill(params.begin(), params.end(), 0.0f);
  for (int c = 0; c < 3; ++c) params[static_cast<std::size_t>(c * 3 + c)] = 5.0f;  // fc.weight [3 × 3]
  const Evaluation small_batches = evaluate(**model, data, 2);
  const Evaluation one_batch = evaluate(**model, data, 100);
  EXPECT_EQ(small_batches.count, 7u);
  EXPECT_NEAR(small_batches.accuracy, 6.0 / 7.0, 1e-12);
  EXPECT_NEAR(small_batches.loss, one_batch.loss, 1e-6);
  const double hit = std::log(1 + 2 * std::exp(-5.0)), miss = hit + 5.0;
  EXPECT_NEAR(small_batches.loss, (6 * hit + miss) / 7.0, 1e-5);

  // A diverged model is right about nothing (with NaN logits, the arg max was class 0: 2 of 7).
  std::fill(params.begin(), params.end(), std::numeric_limits<float>::quiet_NaN());
  const Evaluation diverged = evaluate(**model, data, 2);
  EXPECT_EQ(diverged.accuracy, 0.0);
  EXPECT_TRUE(std::isnan(diverged.loss));
}

}  // namespace
}  // namespace ballot::learning
