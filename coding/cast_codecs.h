// The trivial baselines: the gradient sent as fp32, fp16 or bf16 (no randomness, no state).
//
// fp16: IEEE binary16, round to nearest even; |v| >= 65520 becomes ±inf; NaN stays a quiet NaN.
// bf16: the upper 16 bits of the float after rounding to nearest even; NaN stays a quiet NaN.
// Wire: header + d values (4 or 2 bytes each). Exact size 24 + 4d or 24 + 2d. Granularity is
// irrelevant (carried for symmetry). O(d), deterministic, bit-identical on every ISA.
#pragma once

#include <cstdint>

#include "coding/codec.h"

namespace ballot::coding {

enum class FloatFormat : std::uint8_t { kFp32, kFp16, kBf16 };

class CastCodec final : public Codec {
 public:
  explicit CastCodec(FloatFormat format) : format_(format) {}

  CodecId id() const noexcept override;
  std::string spec() const override;
  Granularity granularity() const noexcept override { return Granularity::kModel; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

  FloatFormat format() const noexcept { return format_; }
  // The decoder's checks of a message (its header, then exactly d values, nothing after) and its
  // values: 4 or 2 bytes each, little-endian. Shared by decode_add and the CUDA decoder.
  Result<std::span<const std::uint8_t>> values(std::span<const std::uint8_t> bytes, const GradientLayout& layout) const;

 private:
  FloatFormat format_;
};

// Scalar conversions (the reference the vector paths must match bit for bit).
std::uint16_t float_to_fp16(float value) noexcept;
float fp16_to_float(std::uint16_t half) noexcept;
std::uint16_t float_to_bf16(float value) noexcept;
float bf16_to_float(std::uint16_t bits) noexcept;

}  // namespace ballot::coding
