#include "coding/quantizers.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "coding/detail/bit_stream.h"
#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/detail/quantized_wire.h"
#include "coding/detail/rounding.h"
#include "coding/wire_format.h"
#include "core/enforce.h"
#include "core/spec.h"

namespace ballot::coding {
namespace {

int level_bits(std::uint32_t s) { return std::bit_width(s); }

// Elias bits per coordinate at most: gamma(s+1) plus a sign bit.
std::uint64_t max_elias_bits(std::uint32_t s) {
  return 2 * static_cast<std::uint64_t>(std::bit_width(std::uint64_t{s} + 1) - 1) + 2;
}

// The levels of an Elias-coded message (after its norms) as planes, validated: the bit count, the
// padding, every code (γ of level + 1 ≤ s + 1, then the sign if the level is not 0) and the end.
Status transcode_elias(ByteReader& reader, std::size_t d, std::uint32_t s, detail::QsgdPlanes& view) {
  BALLOT_ASSIGN_OR_RETURN(const std::uint64_t bits, reader.read<std::uint64_t>("bit count"));
  if (bits > static_cast<std::uint64_t>(d) * max_elias_bits(s)) {
    return malformed("QSGD Elias stream of " + std::to_string(bits) + " bits is too long");
  }
  // Every code is at least one bit: checked before the planes are allocated, so a short message
  // cannot make the decoder allocate for d coordinates.
  if (bits < d) {
    return malformed("QSGD Elias stream of " + std::to_string(bits) + " bits is too short for " + std::to_string(d) +
                     " coordinates");
  }
  BALLOT_ASSIGN_OR_RETURN(const auto words, reader.take(BitVector::words_for(bits), 8, "Elias stream"));
  BALLOT_TRY(reader.expect_end());
  if (bits % 64 != 0 && (load_pod<std::uint64_t>(words.data() + words.size() - 8) >> (bits % 64)) != 0) {
    return malformed("non-zero padding after the QSGD Elias stream");
  }
  const int max_width = std::bit_width(std::uint64_t{s} + 1);
  const std::size_t stream_bytes = detail::sign_bytes(d);
  view.transcoded.assign(stream_bytes * (1 + static_cast<std::size_t>(view.planes)), 0);
  std::uint8_t* signs = view.transcoded.data();
  detail::BitReader in(words.data(), bits);
  for (std::size_t i = 0; i < d; ++i) {
    std::uint64_t code = 0;
    std::uint32_t sign = 1;  // level 0 has no sign bit: +
    if (!in.get_gamma(code, max_width) || code - 1 > s) {
      return malformed("bad QSGD Elias code at coordinate " + std::to_string(i));
    }
    if (code > 1 && !in.get(sign)) {
      return malformed("QSGD Elias stream truncated at coordinate " + std::to_string(i));
    }
    const auto bit = static_cast<std::uint8_t>(1u << (i % 8));
    if (sign) signs[i / 8] |= bit;
    for (std::uint64_t level = code - 1, p = 0; level != 0; level >>= 1, ++p) {
      if (level & 1u) signs[stream_bytes * (1 + p) + i / 8] |= bit;
    }
  }
  if (in.position() != bits) return malformed("trailing bits after the QSGD Elias stream");
  view.streams = view.transcoded;
  return {};
}

}  // namespace

namespace detail {

Result<QsgdPlanes> read_qsgd_planes(std::span<const std::uint8_t> bytes, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, CodecId::kQsgd, QsgdCodec::kEliasFlag, layout));
  QsgdPlanes view;
  view.segments = segments_of(layout, header.granularity);
  const std::size_t d = layout.total_size();
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(view.s, reader.read<std::uint32_t>("levels"));
  const std::uint32_t s = view.s;
  if (s < 1 || s > QsgdCodec::kMaxLevels) return malformed("QSGD level count " + std::to_string(s) + " out of range");
  BALLOT_ASSIGN_OR_RETURN(view.norms, reader.take(view.segments.size(), 4, "norms"));
  view.planes = level_bits(s);
  const int planes = view.planes;
  if (header.flags & QsgdCodec::kEliasFlag) {
    BALLOT_TRY(transcode_elias(reader, d, s, view));
    return view;
  }
  const std::size_t stream_bytes = sign_bytes(d);
  BALLOT_ASSIGN_OR_RETURN(view.streams,
                          reader.take(1 + static_cast<std::size_t>(planes), stream_bytes, "level planes"));
  BALLOT_TRY(reader.expect_end());
  if (d == 0) return view;
  const auto streams = view.streams;
  for (int p = 0; p <= planes; ++p) {
    BALLOT_TRY(check_padding(streams.data() + stream_bytes * static_cast<std::size_t>(p), d, "QSGD planes"));
  }
  // Levels above s are possible in b bit-planes when s + 1 is not a power of two. Check every
  // word first, bit-sliced (64 coordinates per step, from the top plane down: "greater" once a
  // plane has a 1 where s has a 0 while all higher bits were equal), then add.
  const std::size_t num_words = BitVector::words_for(d);
  auto plane_word = [&](int p, std::size_t w) {
    return load_pod<std::uint64_t>(streams.data() + stream_bytes * (1 + static_cast<std::size_t>(p)) + 8 * w);
  };
  for (std::size_t w = 0; w < num_words; ++w) {
    std::uint64_t greater = 0, equal = ~std::uint64_t{0};
    for (int p = planes - 1; p >= 0; --p) {
      const std::uint64_t bits = plane_word(p, w);
      if ((s >> p) & 1u) {
        equal &= bits;
      } else {
        greater |= equal & bits;
        equal &= ~bits;
      }
    }
    if (greater != 0) {
      const std::size_t i = 64 * w + static_cast<std::size_t>(std::countr_zero(greater));
      return malformed("QSGD level above s = " + std::to_string(s) + " at coordinate " + std::to_string(i));
    }
  }
  return view;
}

Result<TernGradStreams> read_terngrad_streams(std::span<const std::uint8_t> bytes, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, CodecId::kTernGrad, 0, layout));
  TernGradStreams view;
  view.segments = segments_of(layout, header.granularity);
  const std::size_t d = layout.total_size();
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(view.scales, reader.take(view.segments.size(), 4, "scales"));
  const std::size_t stream_bytes = sign_bytes(d);
  BALLOT_ASSIGN_OR_RETURN(view.streams, reader.take(2, stream_bytes, "sign and mask"));
  BALLOT_TRY(reader.expect_end());
  if (d == 0) return view;
  BALLOT_TRY(check_padding(view.streams.data(), d, "TernGrad signs"));
  BALLOT_TRY(check_padding(view.streams.data() + stream_bytes, d, "TernGrad mask"));
  return view;
}

}  // namespace detail

// ---- QSGD -----------------------------------------------------------------------------------

QsgdCodec::QsgdCodec(QsgdOptions options) : options_(options) {
  BALLOT_ENFORCE(options_.s >= 1 && options_.s <= kMaxLevels, "QSGD needs 1 <= s <= 65535");
}

std::string QsgdCodec::spec() const {
  return std::string("qsgd:elias=") + (options_.elias ? "1" : "0") +
         ",granularity=" + granularity_name(options_.granularity) + ",s=" + std::to_string(options_.s);
}

std::size_t QsgdCodec::wire_size(const GradientLayout& layout) const {
  const std::size_t S = options_.granularity == Granularity::kModel ? 1 : layout.num_layers();
  const std::size_t d = layout.total_size();
  const std::size_t words = BitVector::words_for(d);
  if (!options_.elias) {
    return kHeaderBytes + 4 + 4 * S + 8 * (1 + static_cast<std::size_t>(level_bits(options_.s))) * words;
  }
  return kHeaderBytes + 4 + 4 * S + 8 + 8 * BitVector::words_for(d * max_elias_bits(options_.s));
}

EncodedGradient QsgdCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const std::size_t d = gradient.size();
  const auto segments = segments_of(layout, options_.granularity);
  const std::uint32_t s = options_.s;
  const float s_float = static_cast<float>(s);
  std::vector<float> norms(segments.size()), inverse(segments.size());
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const auto factors =
        detail::qsgd_factors(detail::sum_squares(gradient.data() + segments[k].offset, segments[k].size), s_float);
    norms[k] = factors.norm;
    inverse[k] = factors.inverse;
  }
  const detail::RoundingStream random(rng, d);
  EncodedGradient out;
  write_header(out.bytes, id(), options_.granularity, options_.elias ? kEliasFlag : 0, layout,
               wire_size(layout) - kHeaderBytes);
  append_pod<std::uint32_t>(out.bytes, s);
  append_pods<float>(out.bytes, norms);

  if (!options_.elias) {
    // One fused pass per segment: random bits, levels, sign and level bit-planes, straight into
    // the zeroed wire streams.
    const int planes = level_bits(s);
    const std::size_t stream_bytes = detail::sign_bytes(d);
    const std::size_t at = out.bytes.size();
    out.bytes.resize(at + stream_bytes * (1 + static_cast<std::size_t>(planes)), 0);
    std::uint8_t* signs = out.bytes.data() + at;
    for (std::size_t k = 0; k < segments.size(); ++k) {
      detail::qsgd_quantize(random, gradient.data(), segments[k].offset, segments[k].offset + segments[k].size,
                            inverse[k], s_float, signs, signs + stream_bytes, stream_bytes, planes);
    }
    return out;
  }
  std::vector<std::uint32_t> level(std::min(d, detail::kBlock));
  detail::BitWriter writer;
  std::size_t cursor = 0;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock), n = end - begin;
    detail::for_each_piece(segments, begin, end, cursor, [&](std::size_t k, std::size_t lo, std::size_t hi) {
      detail::qsgd_levels(random, gradient.data(), lo, hi, inverse[k], s_float, level.data() + (lo - begin));
    });
    const float* x = gradient.data() + begin;
    for (std::size_t i = 0; i < n; ++i) {
      writer.put_gamma(std::uint64_t{level[i]} + 1);
      if (level[i] != 0) writer.put(x[i] < 0.0f ? 0u : 1u, 1);
    }
  }
  append_pod<std::uint64_t>(out.bytes, writer.bit_count());
  const auto words = writer.finish();
  append_pods<std::uint64_t>(out.bytes, words);
  return out;
}

Status QsgdCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                             std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  // Either coding decodes from planes (an Elias stream is transcoded into them, validated).
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_qsgd_planes(bytes, layout));
  const auto& segments = view.segments;
  const std::size_t d = layout.total_size();
  std::vector<float> unit(segments.size());  // weight · ‖v‖ / s per segment
  for (std::size_t k = 0; k < segments.size(); ++k) {
    unit[k] = weight * (load_pod<float>(view.norms.data() + 4 * k) / static_cast<float>(view.s));
  }
  float* acc = accumulator.data();
  const int planes = view.planes;
  const std::size_t stream_bytes = detail::sign_bytes(d);
  const auto streams = view.streams;
  if (d == 0) return {};
  const std::size_t block = std::min(d, detail::kBlock);
  std::vector<float> sign(block), bit(block), level(block);
  BitVector scratch;
  std::size_t cursor = 0;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock), n = end - begin;
    std::fill(level.begin(), level.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
    for (int p = 0; p < planes; ++p) {
      detail::unpack_block(streams.data() + stream_bytes * (1 + static_cast<std::size_t>(p)) + begin / 8, scratch,
                           std::span<float>(bit.data(), n));
      detail::add_plane(bit.data(), n, static_cast<float>(1u << p), level.data());
    }
    detail::unpack_block(streams.data() + begin / 8, scratch, std::span<float>(sign.data(), n));
    const float* g = sign.data() - begin;
    const float* l = level.data() - begin;
    detail::for_each_piece(segments, begin, end, cursor, [&](std::size_t k, std::size_t lo, std::size_t hi) {
      const float scale = unit[k];
      for (std::size_t i = lo; i < hi; ++i) acc[i] += scale * g[i] * l[i];
    });
  }
  return {};
}

// ---- TernGrad -------------------------------------------------------------------------------

std::string TernGradCodec::spec() const {
  return "terngrad:clip=" + format_number(options_.clip) + ",granularity=" + granularity_name(options_.granularity);
}

std::size_t TernGradCodec::wire_size(const GradientLayout& layout) const {
  const std::size_t S = options_.granularity == Granularity::kModel ? 1 : layout.num_layers();
  return kHeaderBytes + 4 * S + 2 * detail::sign_bytes(layout.total_size());
}

EncodedGradient TernGradCodec::encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const std::size_t d = gradient.size();
  const auto segments = segments_of(layout, options_.granularity);
  const detail::RoundingStream random(rng, d);
  EncodedGradient out;
  write_header(out.bytes, id(), options_.granularity, 0, layout, wire_size(layout) - kHeaderBytes);
  const std::size_t scales_at = out.bytes.size();
  const std::size_t stream_bytes = detail::sign_bytes(d);
  out.bytes.resize(scales_at + 4 * segments.size() + 2 * stream_bytes, 0);
  std::uint8_t* signs = out.bytes.data() + scales_at + 4 * segments.size();
  std::uint8_t* mask = signs + stream_bytes;
  // Segment by segment: its scale, then the fused quantising pass while the segment is still in
  // cache (per layer) or streaming (whole model).
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const float* x = gradient.data() + segments[k].offset;
    const std::size_t n = segments[k].size;
    // Wen et al. 2017, §3.3: with clipping, each g_i is clipped to [-cσ, cσ] before ternarizing.
    const detail::Moments moments =
        options_.clip > 0 && n > 0 ? detail::moments(x, n) : detail::Moments{detail::max_abs(x, n), 0.0, 0.0};
    const auto factors = detail::terngrad_factors(moments.max_abs, moments.sum, moments.sum_squares, n, options_.clip);
    std::memcpy(out.bytes.data() + scales_at + 4 * k, &factors.scale, 4);
    // b_i ~ Bernoulli(min(|g_i|, limit) / s). A zero segment sends nothing (inv = 0 keeps none); a
    // non-finite scale keeps every coordinate so that the decoded values are non-finite too.
    const float limit = factors.limit, inv = factors.inverse;
    detail::terngrad_quantize(random, gradient.data(), segments[k].offset, segments[k].offset + n, limit, inv,
                              factors.keep_all, signs, mask);
  }
  return out;
}

Status TernGradCodec::decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                                 std::span<float> accumulator, float weight) const {
  BALLOT_ENFORCE_EQ(accumulator.size(), layout.total_size());
  BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_terngrad_streams(bytes, layout));
  const auto& segments = view.segments;
  const std::size_t d = layout.total_size();
  const auto scale_bytes = view.scales;
  const auto streams = view.streams;
  const std::size_t stream_bytes = detail::sign_bytes(d);
  if (d == 0) return {};
  std::vector<float> scaled(segments.size());
  for (std::size_t k = 0; k < segments.size(); ++k) scaled[k] = weight * load_pod<float>(scale_bytes.data() + 4 * k);
  std::vector<float> sign(std::min(d, detail::kBlock)), keep(std::min(d, detail::kBlock));
  BitVector scratch;
  float* acc = accumulator.data();
  std::size_t cursor = 0;
  for (std::size_t begin = 0; begin < d; begin += detail::kBlock) {
    const std::size_t end = std::min(d, begin + detail::kBlock), n = end - begin;
    detail::unpack_block(streams.data() + begin / 8, scratch, std::span<float>(sign.data(), n));
    detail::unpack_block(streams.data() + stream_bytes + begin / 8, scratch, std::span<float>(keep.data(), n));
    const float* g = sign.data() - begin;
    const float* b = keep.data() - begin;
    detail::for_each_piece(segments, begin, end, cursor, [&](std::size_t k, std::size_t lo, std::size_t hi) {
      const float scale = scaled[k];
      for (std::size_t i = lo; i < hi; ++i) acc[i] += b[i] > 0 ? scale * g[i] : 0.0f;
    });
  }
  return {};
}

}  // namespace ballot::coding
