#include "learning/parameter_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/enforce.h"

namespace ballot::learning {
namespace {

constexpr const char* kNoForward =
    "a parameters-only model (init file) has no forward pass: its nodes compute with their own framework, e.g. "
    "ballot.torch";

}  // namespace

ParameterModel::ParameterModel(ParameterFile file, std::filesystem::path source)
    : source_(std::move(source)), tensors_(std::move(file.tensors)), params_(std::move(file.values)) {
  digest_ = learning::layout_digest(tensors_);
  // Offsets and sizes follow from the shapes, whether or not the file came from decoding.
  std::size_t offset = 0;
  for (auto& tensor : tensors_) {
    tensor.offset = offset;
    tensor.size = 1;
    for (const auto dim : tensor.shape) tensor.size *= static_cast<std::size_t>(dim);
    offset += tensor.size;
    layout_.add_layer(tensor.name, tensor.size);
  }
  BALLOT_ENFORCE_EQ(layout_.total_size(), params_.size());
  grads_.assign(params_.size(), 0.0f);
}

std::string ParameterModel::spec() const { return "init:file=" + source_.string(); }

double ParameterModel::forward_backward(std::span<const float>, std::span<const std::uint8_t>) {
  BALLOT_ENFORCE(false, kNoForward);
  return 0.0;
}

void ParameterModel::forward(std::span<const float>, std::span<float>) { BALLOT_ENFORCE(false, kNoForward); }

std::unique_ptr<Model> ParameterModel::clone() const { return std::make_unique<ParameterModel>(*this); }

Result<std::unique_ptr<Model>> make_parameter_model(const std::filesystem::path& path) {
  BALLOT_ASSIGN_OR_RETURN(auto file, read_parameter_file(path));
  // Training starts from these values: a NaN or an infinity would only surface as a diverged run.
  for (const auto& tensor : file.tensors) {
    for (std::size_t i = 0; i < tensor.size; ++i) {
      if (!std::isfinite(file.values[tensor.offset + i])) {
        return make_error(ErrorCode::kInvalidArgument, "parameter file '" + path.string() + "': tensor '" +
                                                           tensor.name + "' has a non-finite value at element " +
                                                           std::to_string(i));
      }
    }
  }
  return std::unique_ptr<Model>(std::make_unique<ParameterModel>(std::move(file), path));
}

}  // namespace ballot::learning
