// GradientLayout: named layer segments over one flat float buffer.
//
// A model exposes its parameters and gradients as one contiguous float buffer; the layout says
// which slice belongs to which layer. Segments are contiguous, in order, and cover [0, total_size()).
// Codecs use it to work on the whole model or per layer (Granularity::Model | Layer).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace ballot {

struct LayerSegment {
  std::string name;
  std::size_t offset = 0;
  std::size_t size = 0;

  friend bool operator==(const LayerSegment&, const LayerSegment&) = default;
};

class GradientLayout {
 public:
  GradientLayout() = default;

  // The most coordinates a layout holds: any byte size computed from it (at most 16 bytes per
  // coordinate) fits in size_t.
  static constexpr std::size_t kMaxSize = std::size_t{1} << 56;

  // A single segment named `name` covering `size` coordinates.
  static GradientLayout whole(std::size_t size, std::string name = "model");

  // Builds a layout from (name, size) pairs; names must be non-empty and unique, the sizes'
  // total at most kMaxSize.
  static Result<GradientLayout> from_sizes(const std::vector<std::pair<std::string, std::size_t>>& layers);

  // Appends a layer after the last one and returns its index. The name must be non-empty and new
  // (a duplicate or a total past kMaxSize is a caller bug: BALLOT_ENFORCE).
  std::size_t add_layer(std::string name, std::size_t size);

  std::span<const LayerSegment> layers() const noexcept { return layers_; }
  std::size_t num_layers() const noexcept { return layers_.size(); }
  const LayerSegment& layer(std::size_t index) const;
  std::size_t total_size() const noexcept { return total_size_; }
  std::optional<std::size_t> find(const std::string& name) const;

  // The slice of `flat` that belongs to layer `index`; `flat` must have total_size() elements.
  std::span<float> slice(std::span<float> flat, std::size_t index) const;
  std::span<const float> slice(std::span<const float> flat, std::size_t index) const;

  friend bool operator==(const GradientLayout&, const GradientLayout&) = default;

 private:
  std::vector<LayerSegment> layers_;
  std::size_t total_size_ = 0;
};

}  // namespace ballot
