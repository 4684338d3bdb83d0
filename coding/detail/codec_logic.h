// Per-coordinate and per-segment arithmetic of the codecs that the CPU code (coding/detail) and the
// CUDA encoders (coding/cuda) share, so that an encoding made on a GPU is the CPU's, bit for bit.
//
// - The stochastic rounding of QSGD and TernGrad (coding/detail/rounding.h says which Philox bits a
//   coordinate draws): every step an IEEE float operation rounded to nearest, never contracted
//   (kernels/update_logic.h's mul_rn/sub_rn).
// - The order of the codecs' double sums (Σx, Σx², Σ|x|): chunks of kSumChunk coordinates; within a chunk
//   kSumLanes lanes, lane j adding coordinates j, j + 16, j + 32, … of the chunk in order; the
//   chunk's sum is its lanes added in lane order; the chunk sums are then added pairwise, level by
//   level (v[i] = v[2i] + v[2i+1], an odd last one carried up). A GPU runs the chunks in parallel
//   and the pairwise levels in a block; the CPU runs them one after the other; the bits agree.
// - Top-k's order of magnitudes: NaN counts as +inf, −0 as +0.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "kernels/update_logic.h"

namespace ballot::coding::detail {

inline constexpr std::size_t kSumChunk = 4096;
inline constexpr int kSumLanes = 16;

// The pairwise levels over v[0..m) in place; returns the total (0 for m = 0).
inline double pairwise_total(double* v, std::size_t m) {
  if (m == 0) return 0.0;
  while (m > 1) {
    const std::size_t half = m / 2;
    for (std::size_t i = 0; i < half; ++i) v[i] = v[2 * i] + v[2 * i + 1];
    if (m % 2 != 0) v[half] = v[m - 1];
    m = half + m % 2;
  }
  return v[0];
}

// The rounding draw of a coordinate with random bits k: u = (k + 1/2) / 2^16, compared as
// (k + 1/2) against p · 2^16.
BALLOT_HOST_DEVICE inline float rounding_draw(std::uint32_t k) {
#if defined(__CUDA_ARCH__)
  // k < 2^16 in the mantissa of 2^23 is the float 2^23 + k; minus 2^23 − 1/2 it is k + 1/2, exact:
  // two full-rate float operations instead of a quarter-rate integer conversion.
  return __fsub_rn(__uint_as_float(0x4B000000u | k), 8388607.5f);
#else
  return static_cast<float>(k) + 0.5f;
#endif
}

// |x| (NaN stays NaN).
BALLOT_HOST_DEVICE inline float abs_value(float x) {
#if defined(__CUDA_ARCH__)
  return fabsf(x);
#else
  return std::fabs(x);
#endif
}

// One NaN on the wire: x86 keeps the sign and payload of the NaN that entered a sum, a GPU writes
// its own pattern, so a per-segment float that came out NaN is written as the quiet NaN 0x7FC00000.
BALLOT_HOST_DEVICE inline float wire_float(float x) {
#if defined(__CUDA_ARCH__)
  return x != x ? __uint_as_float(0x7FC00000u) : x;
#else
  return x != x ? std::bit_cast<float>(0x7FC00000u) : x;
#endif
}

BALLOT_HOST_DEVICE inline double square_root(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

// QSGD's level of x: r = min(|x|·inv, s) (NaN → s), l = ⌊r⌋, level = l + [draw < (r − l)·2^16].
BALLOT_HOST_DEVICE inline std::uint32_t qsgd_level(float x, std::uint32_t k, float inv, float s) {
  float r = kernels::mul_rn(abs_value(x), inv);
  r = r < s ? r : s;  // NaN -> s; so 0 <= r <= s < 2^16
#if defined(__CUDA_ARCH__)
  // ⌊r⌋ without conversions: 2^23 + r rounded toward zero is 2^23 + ⌊r⌋ (r < 2^23), whose mantissa
  // is ⌊r⌋; subtracting 2^23 again is exact. The same values as the truncation below.
  const float shifted = __fadd_rz(r, 8388608.0f);
  const float whole_float = __fsub_rn(shifted, 8388608.0f);
  const std::uint32_t whole = __float_as_uint(shifted) & 0x7FFFFFu;
#else
  const auto whole = static_cast<std::uint32_t>(static_cast<std::int32_t>(r));
  const float whole_float = static_cast<float>(whole);
#endif
  const float fraction = kernels::sub_rn(r, whole_float);
  return whole + (rounding_draw(k) < kernels::mul_rn(fraction, 65536.0f) ? 1u : 0u);
}

// TernGrad's keep bit: draw < min(|x|, limit)·inv·2^16 (NaN → limit).
BALLOT_HOST_DEVICE inline bool terngrad_keep(float x, std::uint32_t k, float limit, float inv) {
  const float a = abs_value(x);
  const float clipped = a < limit ? a : limit;  // NaN -> limit
  return rounding_draw(k) < kernels::mul_rn(kernels::mul_rn(clipped, inv), 65536.0f);
}

// The sign bit of the sign streams: 1 for x ≥ 0, −0 and NaN.
BALLOT_HOST_DEVICE inline bool non_negative(float x) { return !(x < 0.0f); }

// QSGD's per-segment factors from Σx² (in double, as summed above): the norm on the wire and the
// level scale s/‖v‖ as float. s/‖v‖ overflows float when the whole segment is subnormal
// (‖v‖ < s/FLT_MAX): clamped, so that an exact zero stays level 0 (0·inf would be NaN).
struct QsgdFactors {
  float norm, inverse;
};
BALLOT_HOST_DEVICE inline QsgdFactors qsgd_factors(double sum_squares, float s) {
  const double norm = square_root(sum_squares);
  constexpr double kFloatMax = 3.40282346638528859811704183484516925e+38;
  const double ratio = static_cast<double>(s) / norm;
  return {wire_float(static_cast<float>(norm)),
          norm > 0 ? static_cast<float>(ratio < kFloatMax ? ratio : kFloatMax) : 0.0f};
}

// DGC's local gradient clipping (Lin et al. 2018, §3.2) from the segment's Σg² (in double, as summed
// above): the factor min(1, clip/‖g‖₂) as float. A NaN norm compares false and leaves the gradient
// unscaled (its NaNs are then sent).
BALLOT_HOST_DEVICE inline float dgc_clip_factor(double sum_squares, float clip) {
  const double norm = square_root(sum_squares);
  return norm > static_cast<double>(clip) ? static_cast<float>(static_cast<double>(clip) / norm) : 1.0f;
}

// Scaled sign's per-segment scale ‖v‖₁/n (Karimireddy et al. 2019, Alg. 1); 0 for an empty segment.
BALLOT_HOST_DEVICE inline float scaled_sign_scale(double sum_abs, std::size_t n) {
  return n == 0 ? 0.0f : wire_float(static_cast<float>(sum_abs / static_cast<double>(n)));
}

// 1-bit SGD's per-segment reconstruction values (Seide et al. 2014): `positive` for bit 1, the mean
// of the entries that pack as 1 (x ≥ 0, −0, NaN), and `negative` for bit 0, the mean of the
// entries x < 0; 0 where the segment has no such entry. From the two sides' sums (each in the
// chunked order, so an infinity on one side leaves the other side's mean finite) and the count of
// entries x < 0.
struct OneBitScales {
  float positive, negative;
};
BALLOT_HOST_DEVICE inline OneBitScales onebit_scales(double non_negative_sum, double negative_sum,
                                                     std::size_t negatives, std::size_t n) {
  const double below = static_cast<double>(negatives), above = static_cast<double>(n - negatives);
  return {above > 0 ? wire_float(static_cast<float>(non_negative_sum / above)) : 0.0f,
          below > 0 ? wire_float(static_cast<float>(negative_sum / below)) : 0.0f};
}

// TernGrad's per-segment scale and limit. Without clipping (clip ≤ 0) the scale is max|x| and the
// limit +inf; with clipping at clip·σ (σ² = Σx²/n − (Σx/n)², at least 0) both are min(max|x|, cσ)
// and cσ, unless σ = 0 (a constant segment: nothing to clip). `inverse` is 1/scale for a finite,
// positive scale, else 0; `keep_all` is set for a non-finite scale (the message must decode
// non-finite).
struct TernGradFactors {
  float scale, limit, inverse;
  bool keep_all;
};
BALLOT_HOST_DEVICE inline TernGradFactors terngrad_factors(float max_abs, double sum, double sum_squares, std::size_t n,
                                                           float clip) {
  constexpr float kInfinity = __builtin_huge_valf();
  float scale = max_abs;
  float limit = kInfinity;
  if (clip > 0 && n > 0) {
    const double count = static_cast<double>(n);
    const double mean = sum / count;
#if defined(__CUDA_ARCH__)
    const double spread = __dsub_rn(sum_squares / count, __dmul_rn(mean, mean));
    const float cut =
        static_cast<float>(__dmul_rn(static_cast<double>(clip), square_root(spread > 0.0 ? spread : 0.0)));
#else
    const double spread = sum_squares / count - mean * mean;
    const float cut = static_cast<float>(static_cast<double>(clip) * square_root(spread > 0.0 ? spread : 0.0));
#endif
    if (cut > 0) limit = cut;
    if (scale > limit) scale = limit;  // NaN stays NaN
  }
  const bool finite = scale - scale == 0.0f;
  return {wire_float(scale), limit, finite && scale > 0 ? 1.0f / scale : 0.0f, !finite};
}

// Top-k's sort key of a float's bit pattern: |x| as an ordered integer (+0 < … < +inf), every NaN
// equal to +inf, so that a larger key is a larger magnitude and ties are exact.
BALLOT_HOST_DEVICE inline std::uint32_t magnitude_key(std::uint32_t bits) {
  const std::uint32_t a = bits & 0x7FFFFFFFu;
  return a < 0x7F800000u ? a : 0x7F800000u;
}

// ---- the cast codecs (coding/cast_codecs.h): fp16 and bf16 of a float, and back -------------------

BALLOT_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<std::uint32_t>(x);
#endif
}
BALLOT_HOST_DEVICE inline float bits_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// Round to nearest even by integer arithmetic on the float's bits (F. Giesen's construction), with
// NaN kept quiet and its top payload bits preserved, as F16C's vcvtps2ph does.
BALLOT_HOST_DEVICE inline std::uint16_t fp16_of(float value) {
  std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint32_t out;
  if (bits >= 0x47800000u) {  // >= 65536 (inf or NaN included)
    out = bits > 0x7F800000u ? (0x7E00u | ((bits >> 13) & 0x3FFu)) : 0x7C00u;
  } else if (bits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Adding 0.5 (2^-1) aligns the half-subnormal unit (2^-24) with the float's last mantissa
    // bit; the float addition's round-to-nearest-even does the rounding.
    out = float_bits(kernels::add_rn(bits_float(bits), bits_float(0x3F000000u))) - 0x3F000000u;
  } else {
    const std::uint32_t mantissa_odd = (bits >> 13) & 1u;
    bits += 0xC8000FFFu;  // rebias exponent (15 - 127) << 23, plus the rounding bias 0xFFF
    bits += mantissa_odd;
    out = bits >> 13;  // may carry into the exponent: 65520..65535 become inf, as they should
  }
  return static_cast<std::uint16_t>(out | (sign >> 16));
}

BALLOT_HOST_DEVICE inline float float_of_fp16(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half & 0x3FFu;
  std::uint32_t bits;
  if (exponent == 0x1F) {
    bits = mantissa == 0 ? 0x7F800000u : (0x7FC00000u | (mantissa << 13));
  } else if (exponent == 0) {
    // Subnormal: mantissa · 2^-24, exact in float.
    bits = float_bits(kernels::mul_rn(static_cast<float>(mantissa), 1.0f / 16777216.0f));
  } else {
    bits = ((exponent + 112u) << 23) | (mantissa << 13);
  }
  return bits_float(bits | sign);
}

// Round to nearest even; a NaN stays a quiet NaN with its top payload bits. (A select, not a
// branch: the CPU's loop over a block vectorises.)
BALLOT_HOST_DEVICE inline std::uint16_t bf16_of(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet = (bits >> 16) | 0x40u;
  return static_cast<std::uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
}

BALLOT_HOST_DEVICE inline float float_of_bf16(std::uint16_t bits) {
  return bits_float(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace ballot::coding::detail
