#include "learning/model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/enforce.h"
#include "learning/dataset.h"

namespace ballot::learning {

double softmax_cross_entropy(std::span<const float> logits, std::span<const std::uint8_t> labels,
                             std::size_t num_classes, std::span<float> grad_logits) {
  BALLOT_ENFORCE_GT(num_classes, 0u);
  BALLOT_ENFORCE_EQ(logits.size(), labels.size() * num_classes);
  const bool want_grad = !grad_logits.empty();
  if (want_grad) BALLOT_ENFORCE_EQ(grad_logits.size(), logits.size());
  const std::size_t batch = labels.size();
  if (batch == 0) return 0.0;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  double total = 0.0;
  for (std::size_t i = 0; i < batch; ++i) {
    BALLOT_ENFORCE_LT(labels[i], num_classes);
    const float* z = logits.data() + i * num_classes;
    // loss_i = log Σ_c exp(z_c − m) + m − z_y with m = max_c z_c (log-sum-exp, no overflow).
    double m = z[0];
    for (std::size_t c = 1; c < num_classes; ++c) m = std::max(m, static_cast<double>(z[c]));
    double sum = 0.0;
    for (std::size_t c = 0; c < num_classes; ++c) sum += std::exp(static_cast<double>(z[c]) - m);
    const double log_sum = std::log(sum);
    total += log_sum + m - static_cast<double>(z[labels[i]]);
    if (want_grad) {
      // d loss / d z_c = (softmax_c − [c = y]) / batch.
      float* g = grad_logits.data() + i * num_classes;
      for (std::size_t c = 0; c < num_classes; ++c) {
        const double p = std::exp(static_cast<double>(z[c]) - m - log_sum);
        g[c] = static_cast<float>((p - (c == labels[i] ? 1.0 : 0.0)) * inv_batch);
      }
    }
  }
  return total * inv_batch;
}

Evaluation evaluate(Model& model, const Dataset& data, std::size_t batch_size) {
  BALLOT_ENFORCE_EQ(data.num_features, model.num_features());
  BALLOT_ENFORCE_GT(batch_size, 0u);
  const std::size_t classes = model.num_classes();
  Evaluation result;
  std::vector<float> logits;
  double loss_sum = 0.0;
  std::size_t correct = 0;
  for (std::size_t begin = 0; begin < data.size(); begin += batch_size) {
    const std::size_t n = std::min(batch_size, data.size() - begin);
    const std::span<const float> inputs(data.features.data() + begin * data.num_features, n * data.num_features);
    const std::span<const std::uint8_t> labels(data.labels.data() + begin, n);
    logits.resize(n * classes);
    model.forward(inputs, logits);
    loss_sum += softmax_cross_entropy(logits, labels, classes, {}) * static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float* z = logits.data() + i * classes;
      // A NaN logit is a wrong answer (max_element would pick class 0 and score a diverged model
      // at class 0's share of the labels).
      if (std::any_of(z, z + classes, [](float v) { return std::isnan(v); })) continue;
      const std::size_t best = static_cast<std::size_t>(std::max_element(z, z + classes) - z);
      correct += best == labels[i] ? 1 : 0;
    }
  }
  result.count = data.size();
  if (result.count > 0) {
    result.loss = loss_sum / static_cast<double>(result.count);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  }
  return result;
}

}  // namespace ballot::learning
