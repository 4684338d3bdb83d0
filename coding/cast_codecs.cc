#include "coding/cast_codecs.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/wire_format.h"
#include "core/enforce.h"
#include "kernels/isa.h"

namespace ballot::coding {

// The conversions are codec_logic.h's, which the CUDA encoder and decoder run too.
std::uint16_t float_to_fp16(float value) noexcept { return detail::fp16_of(value); }
float fp16_to_float(std::uint16_t half) noexcept { return detail::float_of_fp16(half); }
std::uint16_t float_to_bf16(float value) noexcept { return detail::bf16_of(value); }
float bf16_to_float(std::uint16_t bits) noexcept { return detail::float_of_bf16(bits); }

namespace {

std::size_t value_bytes(FloatFormat format) { return format == FloatFormat::kFp32 ? 4 : 2; }

// The active ISA level includes kAvx2 (AVX2 and F16C).
bool avx2_usable() {
#if defined(__x86_64__)
  return kernels::active_isa() >= kernels::Isa::kAvx2;
#else
  return false;
#endif
}

// F16C (in the kAvx2 level) converts eight values a step with fp16_of's and float_of_fp16's results
// (round to nearest even; a NaN quieted, its top payload bits kept) while MXCSR neither flushes
// denormal results nor zeroes denormal inputs (FTZ, DAZ); otherwise the scalar functions run.
bool f16c_usable() {
#if defined(__x86_64__)
  return avx2_usable() && (_mm_getcsr() & 0x8040u) == 0;
#else
  return false;
#endif
}

#if defined(__x86_64__)
#define BALLOT_F16C __attribute__((target("avx,f16c")))
#define BALLOT_AVX2 __attribute__((target("avx2")))
#else
#define BALLOT_F16C
#define BALLOT_AVX2
#endif

// fp16_of over n floats into 2n bytes, and float_of_fp16 back (F16C on x86-64; called only when
// f16c_usable()).
BALLOT_F16C void fp16_of_block(const float* src, std::size_t n, std::uint8_t* dst) {
  std::size_t i = 0;
#if defined(__x86_64__)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) {
    const std::uint16_t half = detail::fp16_of(src[i]);
    std::memcpy(dst + 2 * i, &half, 2);
  }
}
BALLOT_F16C void floats_of_fp16_block(const std::uint8_t* src, std::size_t n, float* dst) {
  std::size_t i = 0;
#if defined(__x86_64__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  }
#endif
  for (; i < n; ++i) dst[i] = detail::float_of_fp16(load_pod<std::uint16_t>(src + 2 * i));
}

#if defined(__x86_64__)
// bf16_of of eight floats, in the low 16 bits of each 32-bit lane.
BALLOT_AVX2 __m256i bf16_of_eight(const float* x) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), _mm256_and_si256(high, _mm256_set1_epi32(1))),
      16);
  // |bits| ≤ 0x7FFFFFFF, so the signed comparison is the unsigned one.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
}
#endif

// bf16_of over n floats into 2n bytes, and float_of_bf16 back, eight values a step with AVX2's
// integer operations (the same arithmetic on the bits, so no MXCSR dependence; called only at
// the kAvx2 level and above).
BALLOT_AVX2 void bf16_of_block(const float* src, std::size_t n, std::uint8_t* dst) {
  std::size_t i = 0;
#if defined(__x86_64__)
  for (; i + 16 <= n; i += 16) {
    // packus interleaves the two inputs' 128-bit halves; the permute restores the order.
    const __m256i packed =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_of_eight(src + i), bf16_of_eight(src + i + 8)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), packed);
  }
#endif
  for (; i < n; ++i) {
    const std::uint16_t value = detail::bf16_of(src[i]);
    std::memcpy(dst + 2 * i, &value, 2);
  }
}
BALLOT_AVX2 void floats_of_bf16_block(const std::uint8_t* src, std::size_t n, float* dst) {
  std::size_t i = 0;
#if defined(__x86_64__)
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(wide, 16));
  }
#endif
  for (; i < n; ++i) dst[i] = detail::float_of_bf16(load_pod<std::uint16_t>(src + 2 * i));
}

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
  if (format_ == FloatFormat::kFp16 && f16c_usable()) {
    fp16_of_block(gradient.data(), gradient.size(), dst);
    return out;
  }
  if (format_ == FloatFormat::kBf16 && avx2_usable()) {
    bf16_of_block(gradient.data(), gradient.size(), dst);
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
    return {};
  }
  // Blocks of values converted into floats, then added: both loops vectorise (the wire bytes may
  // alias the accumulator as far as the compiler knows; the block may not).
  const bool f16c = format_ == FloatFormat::kFp16 && f16c_usable();
  const bool avx2 = format_ == FloatFormat::kBf16 && avx2_usable();
  float block[detail::kBlock];
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t n = std::min(detail::kBlock, d - begin);
    const std::uint8_t* piece = src + 2 * begin;
    if (f16c) {
      floats_of_fp16_block(piece, n, block);
    } else if (avx2) {
      floats_of_bf16_block(piece, n, block);
    } else if (format_ == FloatFormat::kFp16) {
      for (std::size_t i = 0; i < n; ++i) block[i] = fp16_to_float(load_pod<std::uint16_t>(piece + 2 * i));
    } else {
      for (std::size_t i = 0; i < n; ++i) block[i] = bf16_to_float(load_pod<std::uint16_t>(piece + 2 * i));
    }
    float* a = acc + begin;
    for (std::size_t i = 0; i < n; ++i) a[i] += weight * block[i];
  }
  return {};
}

}  // namespace ballot::coding
