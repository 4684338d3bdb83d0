// The built-in models: multinomial logistic regression, a ReLU MLP, and a small CNN for images.
// All are trained with softmax cross-entropy (learning/model.h) and run forward and backward on the
// CPU with Eigen GEMMs (convolutions as im2col + GEMM). Eigen stays inside models.cc.
//
// Parameter layout (one flat buffer, a GradientLayout segment per tensor, in this order):
//   dense layer "<name>.weight" [out × in] row-major (the PyTorch nn.Linear convention), then
//   "<name>.bias" [out]; convolution "<name>.weight" [c_out × c_in × k × k], "<name>.bias" [c_out].
// Activations are stored height × width × channel (channel fastest), so the CNN's "fc" layer
// reads its input in that order.
// Initialisation (PyTorch's default for Linear/Conv2d): every weight and bias ~ U(−1/√fan_in,
// 1/√fan_in), drawn from Rng(seed, stream_id({kInitPurpose, tensor index})).
// Cost of forward_backward per example: ~6·(parameters of dense layers) flops, plus for each
// convolution 6·H·W·c_out·c_in·k² flops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "learning/model.h"

namespace ballot::learning {

inline constexpr std::uint64_t kInitPurpose = 0x696e697400000000ULL;  // "init"

struct LogisticRegressionOptions {
  std::size_t num_features = 784;
  std::size_t num_classes = 10;
};

// num_features → hidden[0] → ReLU → … → hidden[k−1] → ReLU → num_classes.
struct MlpOptions {
  std::size_t num_features = 784;
  std::vector<std::size_t> hidden = {128};
  std::size_t num_classes = 10;
};

// conv(k×k, `conv1` channels, same padding) → ReLU → maxpool 2×2 → conv(k×k, `conv2` channels)
// → ReLU → maxpool 2×2 → fully connected → num_classes. Needs rows, cols >= 4 and odd k.
struct CnnOptions {
  std::size_t rows = 28, cols = 28, channels = 1;
  std::size_t conv1 = 8, conv2 = 16;
  std::size_t kernel = 5;
  std::size_t num_classes = 10;
};

// Invalid options (zero sizes, more than 256 classes, an even kernel, an image under 4×4, more
// than kMaxModelParameters parameters) are kInvalidArgument.
inline constexpr std::uint64_t kMaxModelParameters = std::uint64_t{1} << 31;
Result<std::unique_ptr<Model>> make_logistic_regression(const LogisticRegressionOptions& options, std::uint64_t seed);
Result<std::unique_ptr<Model>> make_mlp(const MlpOptions& options, std::uint64_t seed);
Result<std::unique_ptr<Model>> make_cnn(const CnnOptions& options, std::uint64_t seed);

// What a model is built for: the input size (and image shape, for the CNN) and the classes.
struct ModelShape {
  std::size_t num_features = 784;
  std::size_t num_classes = 10;
  std::size_t rows = 28, cols = 28, channels = 1;  // 0 when the inputs are not images
};
ModelShape shape_of(const Dataset& data);

// The model registry, specs parsed with ballot::Spec (unknown keys are errors):
//   "logreg"
//   "mlp"  hidden=128 (sizes joined by '/', e.g. hidden=256/128)
//   "cnn"  c1=8, c2=16, k=5   (needs an image shape)
//   "synthetic"  d=1000000: d parameters and a gradient that costs one pass over them (it learns
//                nothing; for benchmarks that measure communication, bench/cluster)
//   "init" file=PATH: the parameters-only model of a Ballot parameter file
//                (learning/parameter_model.h; no forward pass, the shape and seed are ignored; PATH
//                may not hold ','). A missing or bad file is its read error, after the spec.
Result<std::unique_ptr<Model>> make_model(std::string_view spec, const ModelShape& shape, std::uint64_t seed);

}  // namespace ballot::learning
