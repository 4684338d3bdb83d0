#include "core/gradient_layout.h"

#include "core/enforce.h"

namespace ballot {

GradientLayout GradientLayout::whole(std::size_t size, std::string name) {
  GradientLayout layout;
  layout.add_layer(std::move(name), size);
  return layout;
}

Result<GradientLayout> GradientLayout::from_sizes(const std::vector<std::pair<std::string, std::size_t>>& layers) {
  GradientLayout layout;
  for (const auto& [name, size] : layers) {
    if (name.empty()) return make_error(ErrorCode::kInvalidArgument, "layer name is empty");
    if (layout.find(name)) {
      return make_error(ErrorCode::kInvalidArgument, "duplicate layer name '" + name + "'");
    }
    if (size > kMaxSize - layout.total_size_) {
      return make_error(ErrorCode::kInvalidArgument, "layer sizes total more than 2^56 coordinates (layer '" + name +
                                                         "': " + std::to_string(size) + ")");
    }
    layout.add_layer(name, size);
  }
  return layout;
}

std::size_t GradientLayout::add_layer(std::string name, std::size_t size) {
  BALLOT_ENFORCE(!name.empty(), "layer name is empty");
  BALLOT_ENFORCE(!find(name).has_value(), "duplicate layer name " + name);
  BALLOT_ENFORCE_LE(size, kMaxSize - total_size_);
  layers_.push_back(LayerSegment{std::move(name), total_size_, size});
  total_size_ += size;
  return layers_.size() - 1;
}

const LayerSegment& GradientLayout::layer(std::size_t index) const {
  BALLOT_ENFORCE_LT(index, layers_.size());
  return layers_[index];
}

std::optional<std::size_t> GradientLayout::find(const std::string& name) const {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].name == name) return i;
  }
  return std::nullopt;
}

std::span<float> GradientLayout::slice(std::span<float> flat, std::size_t index) const {
  BALLOT_ENFORCE_EQ(flat.size(), total_size_);
  const auto& segment = layer(index);
  return flat.subspan(segment.offset, segment.size);
}

std::span<const float> GradientLayout::slice(std::span<const float> flat, std::size_t index) const {
  BALLOT_ENFORCE_EQ(flat.size(), total_size_);
  const auto& segment = layer(index);
  return flat.subspan(segment.offset, segment.size);
}

}  // namespace ballot
