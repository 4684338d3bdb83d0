// Stochastic quantizers: QSGD and TernGrad. Both are unbiased (E[decode(encode(v))] = v; TernGrad
// only without clipping) up to the 16-bit resolution of the rounding draw (|bias| <= 2^-17 of one
// quantisation step per coordinate). The draws are 16 bits per coordinate of the Rng's Philox
// stream (coding/detail/rounding.h: 16 Philox blocks per 128 coordinates, the Rng advanced past
// them), so an encoding is a pure function of the input and (seed, stream, position), and the
// same on every ISA level. Encode: one reduction pass per segment (norm / max), then one fused
// pass (random bits, rounding, sign and level bit packing).
//
// QSGD (Alistarh et al., NeurIPS 2017), per segment with norm ‖v‖₂ and s levels:
//   Q_s(v_i) = ‖v‖₂ · sign(v_i) · ξ_i,  ξ_i = (l+1)/s with probability |v_i|s/‖v‖₂ − l, else l/s,
//   l = ⌊|v_i| s / ‖v‖₂⌋.  Var ≤ min(d/s², √d/s) ‖v‖₂² (their Lemma 3.1).
//   Wire, fixed width: u32 s, S f32 norms, packed signs (8⌈d/64⌉ bytes), then b = bit_width(s)
//   bit-planes of the levels (8b⌈d/64⌉ bytes): 24 + 4 + 4S + 8(1+b)⌈d/64⌉ bytes, exact.
//   Wire, Elias (flag bit 0): u32 s, S f32 norms, u64 bit count, then per coordinate
//   gamma(level+1) and, for non-zero levels, a sign bit; size depends on the data, at most
//   24 + 4 + 4S + 8 + 8⌈d(2⌊log2(s+1)⌋+2)/64⌉ bytes.
// TernGrad (Wen et al., NeurIPS 2017), per segment: s = max|g_i| (after optional clipping at
//   c·σ, σ the segment's standard deviation; c = 2.5 in the paper), t_i = s·sign(g_i)·b_i,
//   b_i ~ Bernoulli(|g_i|/s).
//   Wire: S f32 scales, packed signs, packed b (8⌈d/64⌉ bytes each): 24 + 4S + 16⌈d/64⌉, exact.
// Non-finite input: the scale/norm becomes non-finite and so do the decoded values.
#pragma once

#include <cstdint>

#include "coding/codec.h"

namespace ballot::coding {

struct QsgdOptions {
  std::uint32_t s = 16;  // quantization levels, 1..65535
  bool elias = false;    // Elias-gamma code the levels (variable size)
  Granularity granularity = Granularity::kModel;
};

class QsgdCodec final : public Codec {
 public:
  static constexpr std::uint32_t kMaxLevels = 65535;
  static constexpr std::uint8_t kEliasFlag = 1;  // header flag bit 0: the levels are Elias-coded
  explicit QsgdCodec(QsgdOptions options = {});

  const QsgdOptions& options() const noexcept { return options_; }
  CodecId id() const noexcept override { return CodecId::kQsgd; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;
  bool exact_wire_size() const noexcept override { return !options_.elias; }

 private:
  QsgdOptions options_;
};

struct TernGradOptions {
  float clip = 0.0f;  // clip at clip·σ when > 0 (then no longer unbiased)
  Granularity granularity = Granularity::kLayer;
};

class TernGradCodec final : public Codec {
 public:
  explicit TernGradCodec(TernGradOptions options = {}) : options_(options) {}

  const TernGradOptions& options() const noexcept { return options_; }
  CodecId id() const noexcept override { return CodecId::kTernGrad; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

 private:
  TernGradOptions options_;
};

}  // namespace ballot::coding
