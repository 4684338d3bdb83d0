// The common header of every encoded gradient, and bounds-checked little-endian reading.
//
// Header (24 bytes, little-endian):
//   [0,2)   magic "BG"
//   [2]     version (kWireVersion)
//   [3]     codec id (CodecId)
//   [4]     granularity (0 model, 1 layer)
//   [5]     flags (codec-specific; unknown bits are an error)
//   [6,8)   reserved, zero
//   [8,16)  d = number of coordinates
//   [16,20) number of layers of the layout
//   [20,24) layout digest (FNV-1a over the layer sizes)
// A receiver checks all of it against its own layout before reading the payload.
// Thread-safe (pure functions).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "coding/codec.h"
#include "core/byte_io.h"
#include "core/gradient_layout.h"
#include "core/result.h"

namespace ballot::coding {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::uint8_t kWireVersion = 1;

struct WireHeader {
  CodecId codec = CodecId::kFp32;
  Granularity granularity = Granularity::kModel;
  std::uint8_t flags = 0;
  std::uint64_t d = 0;
  std::uint32_t num_layers = 0;
  std::uint32_t layout_digest = 0;
};

std::uint32_t layout_digest(const GradientLayout& layout) noexcept;

// Starts an encoding: `out` becomes the header, with `payload_reserve` more bytes reserved.
void write_header(std::vector<std::uint8_t>& out, CodecId codec, Granularity granularity, std::uint8_t flags,
                  const GradientLayout& layout, std::size_t payload_reserve);

// Parses and checks the header against the expected codec, the allowed flag bits and the layout.
// Returns the header; the payload starts at kHeaderBytes.
Result<WireHeader> read_header(std::span<const std::uint8_t> bytes, CodecId expected, std::uint8_t allowed_flags,
                               const GradientLayout& layout);

// The coordinate ranges a codec works on: one for the whole model, one per layer otherwise.
struct Segment {
  std::size_t offset = 0;
  std::size_t size = 0;
};
std::vector<Segment> segments_of(const GradientLayout& layout, Granularity granularity);

// Appends trivially copyable values in little-endian (host) order.
template <typename T>
void append_pod(std::vector<std::uint8_t>& out, const T& value) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}
template <typename T>
void append_pods(std::vector<std::uint8_t>& out, std::span<const T> values) {
  const auto at = out.size();
  out.resize(at + values.size_bytes());
  if (!values.empty()) std::memcpy(out.data() + at, values.data(), values.size_bytes());
}

// Payloads are read with ballot::ByteReader (core/byte_io.h), context "encoded gradient".
using ballot::ByteReader;

Error malformed(const std::string& message);

// Node state of a stateful codec (checkpoints): "BS", version, codec id, 4 zero bytes,
// u64 d (0 while the codec has no state yet), u64 length of the wrapped codec's state, that state,
// then d floats.
std::vector<std::uint8_t> write_state(CodecId codec, std::span<const float> memory,
                                      std::span<const std::uint8_t> inner = {});
struct StateView {
  std::vector<float> memory;            // empty when the saved codec had no state yet
  std::span<const std::uint8_t> inner;  // the wrapped codec's state blob
};
// Validates a state blob against the codec and the layout (d must be 0 or layout.total_size()).
Result<StateView> read_state(std::span<const std::uint8_t> bytes, CodecId codec, const GradientLayout& layout);

template <typename T>
inline T load_pod(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace ballot::coding
