// The fuzz input format of tests/fuzz/codec_decode_fuzz.cc, shared with the seed-corpus generator:
// byte 0 selects the layout (low 2 bits) and whether the rest is an encoded gradient (bit 7 clear)
// or a codec state blob (bit 7 set); the rest is the bytes under test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coding/codec.h"
#include "coding/codec_registry.h"
#include "core/gradient_layout.h"

namespace ballot::coding::fuzz {

inline constexpr std::uint8_t kStateBit = 0x80;

inline GradientLayout layout_for(std::uint8_t selector) {
  switch (selector & 3) {
    case 0:
      return GradientLayout::whole(300);
    case 1:
      return GradientLayout::from_sizes({{"conv", 70}, {"empty", 0}, {"fc", 129}, {"bias", 64}, {"out", 3}}).value();
    case 2:
      return GradientLayout::whole(1);
    default:
      return GradientLayout::whole(0);
  }
}

// One decoder per codec id of the codec table (decoding reads every parameter from the wire,
// so the entry's example serves); for state blobs, the stateful variant (error feedback on).
inline std::unique_ptr<Codec> decoder_for(std::uint8_t codec_id, bool state) {
  const CodecEntry* entry = find_codec(static_cast<CodecId>(codec_id));
  if (entry == nullptr) return nullptr;
  std::string spec(entry->example);
  const bool ef_default = entry->properties.error_feedback;
  if (!entry->properties.own_residual && state != ef_default)
    spec += std::string(spec.find(':') == std::string::npos ? ":" : ",") + (state ? "ef=1" : "ef=0");
  auto made = make_codec(spec);
  return made.ok() ? std::move(made).value() : nullptr;
}

}  // namespace ballot::coding::fuzz
