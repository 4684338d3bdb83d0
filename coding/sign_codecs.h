// One-bit codecs: sign, scaled sign, 1-bit SGD, and Signum (worker momentum, then sign).
//
//   sign         sign(v) (Bernstein et al. 2018)             wire: packed signs
//   scaled_sign  (‖v_s‖₁/d_s)·sign(v) per segment s          wire: S f32 scales, packed signs
//                (Karimireddy et al. 2019, EF-signSGD's compressor; use with ErrorFeedback)
//   onebit       bit 1 -> mean of the non-negative entries of the segment, bit 0 -> mean of its
//                negative entries (Seide et al. 2014); the registry wraps it in error feedback
//                                                            wire: S × (f32 a_s, f32 b_s), signs
//   signum       m <- β m + (1-β) g, send sign(m) (Bernstein et al. 2018; β = 0.9)
//                                                            wire: packed signs (as sign)
// Signs follow core/bit_vector.h (bit 1 = non-negative; -0, +0, NaN -> +1) and are packed by
// kernels::pack_signs. Exact size: 24 + 4·S·(scales per segment) + 8·⌈d/64⌉ bytes, S = 1
// (model) or the number of layers. O(d), one pass over the input, deterministic.
#pragma once

#include <vector>

#include "coding/codec.h"

namespace ballot::coding {

enum class SignKind : std::uint8_t { kSign, kScaledSign, kOneBit };

class SignCodec final : public Codec {
 public:
  explicit SignCodec(SignKind kind, Granularity granularity = Granularity::kLayer)
      : kind_(kind), granularity_(granularity) {}

  SignKind kind() const noexcept { return kind_; }
  CodecId id() const noexcept override;
  std::string spec() const override;
  Granularity granularity() const noexcept override { return granularity_; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

 private:
  SignKind kind_;
  Granularity granularity_;
};

struct SignumOptions {
  double beta = 0.9;  // momentum factor in [0, 1); 0 gives plain signSGD (kernels/momentum.h)
};

// Stateful: the momentum m is node state (save_state/load_state). Decodes to ±1.
class SignumCodec final : public Codec {
 public:
  explicit SignumCodec(SignumOptions options = {}) : options_(options) {}
  const SignumOptions& options() const noexcept { return options_; }

  CodecId id() const noexcept override { return CodecId::kSignum; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return Granularity::kModel; }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

  bool stateful() const noexcept override { return true; }
  std::vector<std::uint8_t> save_state() const override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) override;
  void reset_state() override { momentum_.clear(); }
  std::span<const float> momentum() const noexcept { return momentum_; }

 private:
  SignumOptions options_;
  std::vector<float> momentum_;
};

}  // namespace ballot::coding
