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
    case 0: return GradientLayout::whole(300);
    case 1:
      return GradientLayout::from_sizes({{"conv", 70}, {"empty", 0}, {"fc", 129}, {"bias", 64}, {"out", 3}})
          .value();
    case 2: return GradientLayout::whole(1);
    default: return GradientLayout::whole(0);
  }
}

// One decoder per codec id (decoding reads every parameter from the wire); for state blobs, the
// stateful variants.
inline std::unique_ptr<Codec> decoder_for(std::uint8_t codec_id, bool state) {
  static const char* kByStateless[] = {nullptr, "fp32", "fp16", "bf16", "sign", "scaled_sign",
                                       "signum", "onebit:ef=0", "topk", "randomk", "gtopk",
                                       "threshold:tau=1", "qsgd", "terngrad", "dgc"};
  static const char* kByState[] = {nullptr, "fp32:ef=1", "fp16:ef=1", "bf16:ef=1", "sign:ef=1",
                                   "scaled_sign:ef=1", "signum:ef=1", "onebit", "topk:ef=1",
                                   "randomk:ef=1", "gtopk", "threshold:tau=1,ef=1", "qsgd:ef=1",
                                   "terngrad:ef=1", "dgc"};
  if (codec_id == 0 || codec_id > 14) return nullptr;
  auto made = make_codec(state ? kByState[codec_id] : kByStateless[codec_id]);
  return made.ok() ? std::move(made).value() : nullptr;
}

}  // namespace ballot::coding::fuzz
