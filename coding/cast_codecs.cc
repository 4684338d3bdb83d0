#include "coding/cast_codecs.h"

#include <bit>
#include <cstring>

#include "coding/detail/blocks.h"
#include "coding/wire_format.h"
#include "core/enforce.h"

namespace ballot::coding {

std::uint16_t float_to_fp16(float value) noexcept {
  // Round-to-nearest-even by integer arithmetic on the float's bits (F. Giesen's construction),
  // with NaN kept quiet and its top payload bits preserved, as F16C's vcvtps2ph does.
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint32_t out;
  if (bits >= 0x47800000u) {  // >= 65536 (inf or NaN included)
    out = bits > 0x7F800000u ? (0x7E00u | ((bits >> 13) & 0x3FFu)) : 0x7C00u;
  } else if (bits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Adding 0.5 (2^-1) aligns the half-subnormal unit (2^-24) with the float's last mantissa
    // bit; the FPU's round-to-nearest-even does the rounding.
    const float shifted = std::bit_cast<float>(bits) + std::bit_cast<float>(0x3F000000u);
    out = std::bit_cast<std::uint32_t>(shifted) - 0x3F000000u;
  } else {
    const std::uint32_t mantissa_odd = (bits >> 13) & 1u;
    bits += 0xC8000FFFu;  // rebias exponent (15 - 127) << 23, plus the rounding bias 0xFFF
    bits += mantissa_odd;
    out = bits >> 13;  // may carry into the exponent: 65520..65535 become inf, as they should
  }
  return static_cast<std::uint16_t>(out | (sign >> 16));
}

float fp16_to_float(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half & 0x3FFu;
  std::uint32_t bits;
  if (exponent == 0x1F) {
    bits = mantissa == 0 ? 0x7F800000u : (0x7FC00000u | (mantissa << 13));
  } else if (exponent == 0) {
    // Subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    bits = std::bit_cast<std::uint32_t>(magnitude);
  } else {
    bits = ((exponent + 112u) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits | sign);
}

std::uint16_t float_to_bf16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

namespace {

std::size_t value_bytes(FloatFormat format) { return format == FloatFormat::kFp32 ? 4 : 2; }

}  // namespace

CodecId CastCodec::id() const noexcept {
  switch (format_) {
    case FloatFormat::kFp32:
      return CodecId::kFp32;
    case FloatFormat::kFp16:
      return CodecId::kFp16;
    case FloatFormat::kBf16:
      return CodecId::kBf16;
  }
  return CodecId::kFp32;
}

std::string CastCodec::spec() const { return codec_id_name(id()); }

std::size_t CastCodec::wire_size(const GradientLayout& layout) const {
  return kHeaderBytes + value_bytes(format_) * layout.total_size();
}

EncodedGradient CastCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  EncodedGradient out;
  write_header(out.bytes, id(), Granularity::kModel, 0, layout, value_bytes(format_) * gradient.size());
  const std::size_t at = out.bytes.size();
  out.bytes.resize(at + value_bytes(format_) * gradient.size());
  std::uint8_t* dst = out.bytes.data() + at;
  if (format_ == FloatFormat::kFp32) {
    if (!gradient.empty()) std::memcpy(dst, gradient.data(), gradient.size_bytes());
    return out;
  }
  std::uint16_t buffer[detail::kBlock];
  for (std::size_t begin = 0; begin < gradient.size(); begin += detail::kBlock) {
    const std::size_t n = std::min(detail::kBlock, gradient.size() - begin);
    const float* src = gradient.data() + begin;
    if (format_ == FloatFormat::kFp16) {
      for (std::size_t i = 0; i < n; ++i) buffer[i] = float_to_fp16(src[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) buffer[i] = float_to_bf16(src[i]);
    }
    std::memcpy(dst + 2 * begin, buffer, 2 * n);
  }
  return out;
}

Status CastCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                             std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, id(), 0, layout));
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(const auto values, reader.take(header.d, value_bytes(format_), "values"));
  BALLOT_TRY(reader.expect_end());
  const std::uint8_t* src = values.data();
  float* acc = accumulator.data();
  const std::size_t d = accumulator.size();
  if (format_ == FloatFormat::kFp32) {
    for (std::size_t i = 0; i < d; ++i) acc[i] += weight * load_pod<float>(src + 4 * i);
  } else if (format_ == FloatFormat::kFp16) {
    for (std::size_t i = 0; i < d; ++i) acc[i] += weight * fp16_to_float(load_pod<std::uint16_t>(src + 2 * i));
  } else {
    for (std::size_t i = 0; i < d; ++i) acc[i] += weight * bf16_to_float(load_pod<std::uint16_t>(src + 2 * i));
  }
  return {};
}

}  // namespace ballot::coding
