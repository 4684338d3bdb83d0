// The fixed-width wire forms of QSGD, TernGrad (coding/quantizers.h) and the sign codecs
// (coding/sign_codecs.h), parsed and fully validated once for every decoder (the CPU's decode_add
// and the CUDA decoders): header, counts, stream sizes, zero padding and, for QSGD, every level ≤ s.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "coding/wire_format.h"
#include "core/gradient_layout.h"
#include "core/result.h"

namespace ballot::coding::detail {

// An Elias-coded message's levels are transcoded into planes (held in `transcoded`, which `streams`
// then views: move the object, never copy it). A coordinate of level 0 carries no sign in the Elias
// stream and gets sign bit 1, so every decoder of planes, (unit · ±1) · level, adds exactly what
// the Elias decoder's ±(unit · level) would: +unit · 0 for level 0.
struct QsgdPlanes {
  std::vector<Segment> segments;
  std::uint32_t s = 0;
  int planes = 0;                         // bit_width(s)
  std::span<const std::uint8_t> norms;    // one f32 per segment
  std::span<const std::uint8_t> streams;  // the sign stream, then the level planes (sign_bytes(d) each)
  std::vector<std::uint8_t> transcoded;   // the planes of an Elias-coded message
};
// Either coding; kMalformed for a bad message.
Result<QsgdPlanes> read_qsgd_planes(std::span<const std::uint8_t> bytes, const GradientLayout& layout);

struct TernGradStreams {
  std::vector<Segment> segments;
  std::span<const std::uint8_t> scales;   // one f32 per segment
  std::span<const std::uint8_t> streams;  // the sign stream, then the keep mask
};
Result<TernGradStreams> read_terngrad_streams(std::span<const std::uint8_t> bytes, const GradientLayout& layout);

// sign (scales_per_segment 0: model granularity only), scaled_sign (1) and onebit (2).
struct SignStream {
  std::vector<Segment> segments;
  std::span<const std::uint8_t> scales;  // scales_per_segment f32 per segment
  std::span<const std::uint8_t> signs;   // sign_bytes(d)
};
Result<SignStream> read_sign_stream(std::span<const std::uint8_t> bytes, const GradientLayout& layout, CodecId id,
                                    std::size_t scales_per_segment);

}  // namespace ballot::coding::detail
