#include "coding/cast_codecs.h"

#include <bit>
#include <cstring>

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/wire_format.h"
#include "core/enforce.h"

namespace ballot::coding {

// The conversions are codec_logic.h's, which the CUDA encoder and decoder run too.
std::uint16_t float_to_fp16(float value) noexcept { return detail::fp16_of(value); }
float fp16_to_float(std::uint16_t half) noexcept { return detail::float_of_fp16(half); }
std::uint16_t float_to_bf16(float value) noexcept { return detail::bf16_of(value); }
float bf16_to_float(std::uint16_t bits) noexcept { return detail::float_of_bf16(bits); }

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

Result<std::span<const std::uint8_t>> CastCodec::values(std::span<const std::uint8_t> bytes,
                                                        const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, id(), 0, layout));
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(const auto values, reader.take(header.d, value_bytes(format_), "values"));
  BALLOT_TRY(reader.expect_end());
  return values;
}

Status CastCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                             std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto values, this->values(bytes, layout));
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
