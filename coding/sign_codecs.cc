#include "coding/sign_codecs.h"

#include <cmath>
#include <cstring>

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/detail/quantized_wire.h"
#include "coding/wire_format.h"
#include "core/enforce.h"
#include "core/spec.h"
#include "kernels/momentum.h"

namespace ballot::coding {
namespace {

std::size_t scales_per_segment(SignKind kind) {
  switch (kind) {
    case SignKind::kSign:
      return 0;
    case SignKind::kScaledSign:
      return 1;
    case SignKind::kOneBit:
      return 2;
  }
  return 0;
}

// Writes header + scale placeholders + packed signs of `values`; `on_piece(s, lo, hi)` is called
// for each block piece while the block is hot in cache (to accumulate the scales).
template <typename OnPiece>
EncodedGradient encode_signs(CodecId id, Granularity granularity, std::size_t num_scales, std::span<const float> values,
                             const GradientLayout& layout, std::span<const Segment> segments, OnPiece&& on_piece) {
  EncodedGradient out;
  const std::size_t d = values.size();
  const std::size_t payload = 4 * num_scales + detail::sign_bytes(d);
  write_header(out.bytes, id, granularity, 0, layout, payload);
  const std::size_t scales_at = out.bytes.size();
  out.bytes.resize(scales_at + payload, 0);
  std::uint8_t* words = out.bytes.data() + scales_at + 4 * num_scales;
  BitVector scratch;
  std::size_t cursor = 0;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock);
    detail::pack_block(values.subspan(begin, end - begin), scratch, words + begin / 8);
    detail::for_each_piece(segments, begin, end, cursor, on_piece);
  }
  return out;
}

}  // namespace

CodecId SignCodec::id() const noexcept {
  switch (kind_) {
    case SignKind::kSign:
      return CodecId::kSign;
    case SignKind::kScaledSign:
      return CodecId::kScaledSign;
    case SignKind::kOneBit:
      return CodecId::kOneBit;
  }
  return CodecId::kSign;
}

std::string SignCodec::spec() const {
  std::string text = codec_id_name(id());
  // onebit's error feedback is on by default: a bare onebit says it is off (ErrorFeedback's spec
  // turns it on).
  if (kind_ == SignKind::kOneBit) text += ":ef=0";
  if (kind_ != SignKind::kSign) {
    text += std::string(kind_ == SignKind::kOneBit ? "," : ":") + "granularity=" + granularity_name(granularity_);
  }
  return text;
}

std::size_t SignCodec::wire_size(const GradientLayout& layout) const {
  const std::size_t segments = granularity_ == Granularity::kModel ? 1 : layout.num_layers();
  return kHeaderBytes + 4 * scales_per_segment(kind_) * segments + detail::sign_bytes(layout.total_size());
}

EncodedGradient SignCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  // Plain sign carries no scale, so its granularity is irrelevant: always "model" on the wire.
  const Granularity granularity = kind_ == SignKind::kSign ? Granularity::kModel : granularity_;
  const auto segments = segments_of(layout, granularity);
  const std::size_t per_segment = scales_per_segment(kind_);
  const std::size_t num_scales = per_segment * segments.size();
  if (kind_ == SignKind::kSign) {
    return encode_signs(id(), granularity, 0, gradient, layout, segments, [](std::size_t, std::size_t, std::size_t) {});
  }
  if (kind_ == SignKind::kScaledSign) {
    // ‖v‖₁ in the chunked order of codec_logic.h (which the device encoder reproduces), each piece
    // added while its block is in cache.
    std::vector<detail::ChunkedSum> l1(segments.size(), detail::ChunkedSum(detail::ChunkedSum::Term::kAbs));
    EncodedGradient out =
        encode_signs(id(), granularity, num_scales, gradient, layout, segments,
                     [&](std::size_t s, std::size_t lo, std::size_t hi) { l1[s].add(gradient.data() + lo, hi - lo); });
    // Karimireddy et al. 2019, Alg. 1: C(v) = (‖v‖₁ / d) · sign(v), d of the segment.
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const float scale = detail::scaled_sign_scale(l1[s].total(), segments[s].size);
      std::memcpy(out.bytes.data() + kHeaderBytes + 4 * s, &scale, 4);
    }
    return out;
  }
  // 1-bit SGD: the sums of each side (x where it packs as bit 1, x where it packs as 0) in the
  // chunked order of codec_logic.h (which the device encoder reproduces) and the count of negative
  // entries, each piece added while its block is in cache.
  using Term = detail::ChunkedSum::Term;
  std::vector<detail::ChunkedSum> above(segments.size(), detail::ChunkedSum(Term::kNonNegative));
  std::vector<detail::ChunkedSum> below(segments.size(), detail::ChunkedSum(Term::kNegative));
  std::vector<std::size_t> negatives(segments.size(), 0);
  EncodedGradient out = encode_signs(id(), granularity, num_scales, gradient, layout, segments,
                                     [&](std::size_t s, std::size_t lo, std::size_t hi) {
                                       above[s].add(gradient.data() + lo, hi - lo);
                                       below[s].add(gradient.data() + lo, hi - lo);
                                       negatives[s] += detail::count_negative(gradient.data() + lo, hi - lo);
                                     });
  // Seide et al. 2014: reconstruct each bit by the mean of the values it stands for.
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const detail::OneBitScales scales =
        detail::onebit_scales(above[s].total(), below[s].total(), negatives[s], segments[s].size);
    std::memcpy(out.bytes.data() + kHeaderBytes + 8 * s, &scales.positive, 4);
    std::memcpy(out.bytes.data() + kHeaderBytes + 8 * s + 4, &scales.negative, 4);
  }
  return out;
}

namespace {

// Shared decoder of the sign wire formats: validates everything, then accumulates block by block.
Status decode_signs(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight, CodecId id, std::size_t per_segment) {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sign_stream(bytes, layout, id, per_segment));
  const auto& segments = view.segments;
  const auto scale_bytes = view.scales;
  const auto words = view.signs;
  const std::size_t d = layout.total_size();

  std::vector<float> scales(scale_bytes.size() / 4);
  if (!scales.empty()) std::memcpy(scales.data(), scale_bytes.data(), scale_bytes.size());
  BitVector scratch;
  std::vector<float> unit(std::min(d, detail::kBlock));
  float* acc = accumulator.data();
  std::size_t cursor = 0;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock);
    detail::unpack_block(words.data() + begin / 8, scratch, std::span<float>(unit.data(), end - begin));
    const float* u = unit.data() - begin;  // u[i] for i in [begin, end)
    detail::for_each_piece(segments, begin, end, cursor, [&](std::size_t s, std::size_t lo, std::size_t hi) {
      if (per_segment == 0) {
        for (std::size_t i = lo; i < hi; ++i) acc[i] += weight * u[i];
      } else if (per_segment == 1) {
        const float scaled = weight * scales[s];
        for (std::size_t i = lo; i < hi; ++i) acc[i] += scaled * u[i];
      } else {
        const float a = weight * scales[2 * s], b = weight * scales[2 * s + 1];
        for (std::size_t i = lo; i < hi; ++i) acc[i] += u[i] > 0 ? a : b;
      }
    });
  }
  return {};
}

}  // namespace

namespace detail {

Result<SignStream> read_sign_stream(std::span<const std::uint8_t> bytes, const GradientLayout& layout, CodecId id,
                                    std::size_t scales_per_segment) {
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, id, 0, layout));
  if (scales_per_segment == 0 && header.granularity != Granularity::kModel) {
    return malformed(std::string(codec_id_name(id)) + " must be encoded with model granularity");
  }
  SignStream view;
  view.segments = segments_of(layout, header.granularity);
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(view.scales, reader.take(scales_per_segment * view.segments.size(), 4, "scales"));
  const std::size_t d = layout.total_size();
  BALLOT_ASSIGN_OR_RETURN(view.signs, reader.take(sign_bytes(d), 1, "signs"));
  BALLOT_TRY(reader.expect_end());
  if (d != 0) BALLOT_TRY(check_padding(view.signs.data(), d, "signs"));
  return view;
}

}  // namespace detail

Status SignCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                             std::span<float> accumulator, float weight) const {
  return decode_signs(bytes, layout, accumulator, weight, id(), scales_per_segment(kind_));
}

std::string SignumCodec::spec() const { return "signum:beta=" + format_number(options_.beta); }

std::size_t SignumCodec::wire_size(const GradientLayout& layout) const {
  return kHeaderBytes + detail::sign_bytes(layout.total_size());
}

namespace {

// m[i] ← 0 where m[i] is not finite. In runs of a fixed 64, a loop GCC vectorises at -O2 (the plain
// loop over `count` stays scalar and took a third of the encode).
void forget_non_finite(float* m, std::size_t count) {
  std::size_t i = 0;
  for (; i + 64 <= count; i += 64) {
    float* run = m + i;
    for (int k = 0; k < 64; ++k) run[k] = std::isfinite(run[k]) ? run[k] : 0.0f;
  }
  for (; i < count; ++i) m[i] = std::isfinite(m[i]) ? m[i] : 0.0f;
}

}  // namespace

EncodedGradient SignumCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng&) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  if (momentum_.size() != gradient.size()) momentum_.assign(gradient.size(), 0.0f);
  // Bernstein et al. 2018, Alg. 3 (Signum): m <- β m + (1 - β) g (kernels/momentum.h, the same
  // formula as the workers' momentum of the training runtime), then sign(m).
  const auto factors = kernels::momentum_factors(options_.beta);
  float* m = momentum_.data();
  const float* g = gradient.data();
  const auto segments = segments_of(layout, Granularity::kModel);
  EncodedGradient out;
  const std::size_t d = gradient.size();
  write_header(out.bytes, id(), Granularity::kModel, 0, layout, detail::sign_bytes(d));
  out.bytes.resize(kHeaderBytes + detail::sign_bytes(d), 0);
  BitVector scratch;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock);
    kernels::signum_momentum(std::span<float>(m + begin, end - begin), std::span<const float>(g + begin, end - begin),
                             factors);
    detail::pack_block(std::span<const float>(m + begin, end - begin), scratch,
                       out.bytes.data() + kHeaderBytes + begin / 8);
    // A non-finite gradient entry is sent in this round (NaN and +inf as +1, -inf as -1) and then
    // forgotten: left in the momentum it would send the same sign for ever.
    forget_non_finite(m + begin, end - begin);
  }
  return out;
}

Status SignumCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                               std::span<float> accumulator, float weight) const {
  return decode_signs(bytes, layout, accumulator, weight, id(), 0);
}

std::vector<std::uint8_t> SignumCodec::save_state() const { return write_state(id(), momentum_); }

Status SignumCodec::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(StateView view, read_state(state, id(), layout));
  if (!view.inner.empty()) return malformed("signum state has an unexpected inner state");
  momentum_ = std::move(view.memory);
  return {};
}

}  // namespace ballot::coding
