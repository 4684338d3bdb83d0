// Model: the narrow interface every trainable model offers to the runtime.
//
// A model owns one flat float buffer of parameters and one of gradients, both described by the
// same GradientLayout (DESIGN.md, "Data model"). The runtime, the codecs and the update rules see
// nothing else, so a LibTorch or PyTorch model can plug in by copying (or aliasing) its tensors
// into the flat buffers.
//
// Determinism: a model built with the same options and seed has bit-identical parameters, and
// forward_backward on the same inputs gives bit-identical gradients in the same build.
// Thread-safety: none; forward passes use internal scratch. clone() one model per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/gradient_layout.h"

namespace ballot::learning {

struct Dataset;

class Model {
 public:
  virtual ~Model() = default;

  // The spec that rebuilds this architecture with make_model (learning/models.h), e.g. "mlp:hidden=128".
  virtual std::string spec() const = 0;
  virtual std::size_t num_features() const = 0;  // inputs per example
  virtual std::size_t num_classes() const = 0;   // logits per example
  // False for a parameters-only model (learning/parameter_model.h): forward and forward_backward
  // are then caller bugs, and evaluation must run elsewhere.
  virtual bool has_forward() const { return true; }

  virtual const GradientLayout& layout() const = 0;
  virtual std::span<float> parameters() = 0;
  virtual std::span<const float> parameters() const = 0;
  virtual std::span<float> gradients() = 0;
  virtual std::span<const float> gradients() const = 0;

  // Softmax cross-entropy over a batch: `inputs` holds batch × num_features() floats row-major,
  // `labels` batch entries each < num_classes(). Returns the mean loss over the batch and
  // overwrites gradients() with its gradient. Sizes and labels are preconditions
  // (BALLOT_ENFORCE). Non-finite inputs or parameters give a non-finite loss, never a crash.
  virtual double forward_backward(std::span<const float> inputs, std::span<const std::uint8_t> labels) = 0;

  // Writes batch × num_classes() logits for `inputs` (batch × num_features()).
  virtual void forward(std::span<const float> inputs, std::span<float> logits) = 0;

  // An independent copy (parameters, gradients and architecture).
  virtual std::unique_ptr<Model> clone() const = 0;
};

struct Evaluation {
  double loss = 0.0;      // mean softmax cross-entropy
  double accuracy = 0.0;  // fraction of examples whose arg-max logit is the label
  std::size_t count = 0;
};

// Mean loss and accuracy of `model` on every example of `data`, in batches of `batch_size`.
// data.num_features must equal model.num_features() (BALLOT_ENFORCE). O(size · forward cost).
Evaluation evaluate(Model& model, const Dataset& data, std::size_t batch_size = 500);

// Mean softmax cross-entropy of `logits` (batch × classes) against `labels`; writes
// d(mean loss)/d(logits) into `grad_logits` when it is non-empty. Stable (log-sum-exp).
double softmax_cross_entropy(std::span<const float> logits, std::span<const std::uint8_t> labels,
                             std::size_t num_classes, std::span<float> grad_logits);

}  // namespace ballot::learning
