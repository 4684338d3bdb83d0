// ParameterModel: a parameters-only model, built from a Ballot parameter file (the "init file",
// learning/parameter_file.h). It holds the flat parameters and gradients with one GradientLayout
// segment per tensor (the tensor's name, in file order) and has no forward pass: the nodes that
// train it compute gradients with their own framework (e.g. ballot.torch) and the trusted server,
// which only aggregates and applies updates, needs no model code.
//
// make_model("init:file=PATH", …) builds one (learning/models.h). forward and forward_backward are
// caller bugs (BALLOT_ENFORCE); check has_forward() first. Thread-safety as Model: none; clone().
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "learning/model.h"
#include "learning/parameter_file.h"

namespace ballot::learning {

class ParameterModel final : public Model {
 public:
  // `source` is the path the spec names (spec() returns "init:file=<source>"). The file must be
  // valid (decode_parameter_file checks it; a duplicate name or a size mismatch is a BALLOT_ENFORCE
  // failure); the tensors' offset and size are recomputed from their shapes; gradients start at zero.
  ParameterModel(ParameterFile file, std::filesystem::path source);

  std::string spec() const override;
  std::size_t num_features() const override { return 0; }
  std::size_t num_classes() const override { return 0; }
  bool has_forward() const override { return false; }

  const GradientLayout& layout() const override { return layout_; }
  std::span<float> parameters() override { return params_; }
  std::span<const float> parameters() const override { return params_; }
  std::span<float> gradients() override { return grads_; }
  std::span<const float> gradients() const override { return grads_; }

  double forward_backward(std::span<const float> inputs, std::span<const std::uint8_t> labels) override;
  void forward(std::span<const float> inputs, std::span<float> logits) override;
  std::unique_ptr<Model> clone() const override;

  // The file's tensors (name, shape, offset and size in parameters()).
  const std::vector<ParameterTensor>& tensors() const noexcept { return tensors_; }
  // learning/parameter_file.h's layout digest of tensors().
  const std::array<std::uint8_t, 32>& layout_digest() const noexcept { return digest_; }

 private:
  std::filesystem::path source_;
  std::vector<ParameterTensor> tensors_;
  std::array<std::uint8_t, 32> digest_{};
  GradientLayout layout_;
  std::vector<float> params_;
  std::vector<float> grads_;
};

// Reads `path` and builds its model; errors as read_parameter_file, and kInvalidArgument naming
// the tensor for a NaN or infinite value.
Result<std::unique_ptr<Model>> make_parameter_model(const std::filesystem::path& path);

}  // namespace ballot::learning
