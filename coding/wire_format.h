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
// Thread-safe (pure functions); ByteReader is a cursor owned by one decoder.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "coding/codec.h"
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
void write_header(std::vector<std::uint8_t>& out, CodecId codec, Granularity granularity,
                  std::uint8_t flags, const GradientLayout& layout, std::size_t payload_reserve);

// Parses and checks the header against the expected codec, the allowed flag bits and the layout.
// Returns the header; the payload starts at kHeaderBytes.
Result<WireHeader> read_header(std::span<const std::uint8_t> bytes, CodecId expected,
                               std::uint8_t allowed_flags, const GradientLayout& layout);

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

// A cursor over untrusted bytes: every read checks the remaining length first (no arithmetic on
// untrusted values that could overflow: counts are compared with remaining()/sizeof(T)).
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> bytes, std::size_t start = 0)
      : bytes_(bytes), pos_(start <= bytes.size() ? start : bytes.size()) {}

  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  std::size_t position() const noexcept { return pos_; }

  template <typename T>
  Result<T> read(const char* what) {
    if (remaining() < sizeof(T)) return truncated(what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // A view of `count` elements of T (unaligned: read them with memcpy / load helpers).
  Result<std::span<const std::uint8_t>> take(std::size_t count, std::size_t element_bytes,
                                            const char* what) {
    if (element_bytes != 0 && count > remaining() / element_bytes) return truncated(what);
    const auto view = bytes_.subspan(pos_, count * element_bytes);
    pos_ += count * element_bytes;
    return view;
  }

  // The payload must be consumed exactly: trailing bytes are an error too.
  Status expect_end() const;

 private:
  Error truncated(const char* what) const;
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_;
};

Error malformed(const std::string& message);

// Node state of a stateful codec (checkpoints): "BS", version, codec id, 4 zero bytes,
// u64 d (0 while the codec has no state yet), u64 length of the wrapped codec's state, that state,
// then d floats.
std::vector<std::uint8_t> write_state(CodecId codec, std::span<const float> memory,
                                      std::span<const std::uint8_t> inner = {});
struct StateView {
  std::vector<float> memory;             // empty when the saved codec had no state yet
  std::span<const std::uint8_t> inner;   // the wrapped codec's state blob
};
// Validates a state blob against the codec and the layout (d must be 0 or layout.total_size()).
Result<StateView> read_state(std::span<const std::uint8_t> bytes, CodecId codec,
                             const GradientLayout& layout);

template <typename T>
inline T load_pod(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace ballot::coding
