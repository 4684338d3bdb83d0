#include "coding/codec.h"

namespace ballot::coding {

const char* granularity_name(Granularity granularity) noexcept {
  return granularity == Granularity::kLayer ? "layer" : "model";
}

const char* codec_id_name(CodecId id) noexcept {
  switch (id) {
    case CodecId::kFp32: return "fp32";
    case CodecId::kFp16: return "fp16";
    case CodecId::kBf16: return "bf16";
    case CodecId::kSign: return "sign";
    case CodecId::kScaledSign: return "scaled_sign";
    case CodecId::kSignum: return "signum";
    case CodecId::kOneBit: return "onebit";
    case CodecId::kTopK: return "topk";
    case CodecId::kRandomK: return "randomk";
    case CodecId::kThreshold: return "threshold";
    case CodecId::kGlobalTopK: return "gtopk";
    case CodecId::kQsgd: return "qsgd";
    case CodecId::kTernGrad: return "terngrad";
    case CodecId::kDgc: return "dgc";
  }
  return "unknown";
}

Result<std::vector<float>> Codec::decode(std::span<const std::uint8_t> bytes,
                                         const GradientLayout& layout) const {
  std::vector<float> out(layout.total_size(), 0.0f);
  BALLOT_TRY(decode_add(bytes, layout, out, 1.0f));
  return out;
}

Status Codec::load_state(std::span<const std::uint8_t> state, const GradientLayout&) {
  if (!state.empty()) {
    return make_error(ErrorCode::kMalformed,
                      std::string("codec ") + codec_id_name(id()) + " is stateless but got " +
                          std::to_string(state.size()) + " bytes of state");
  }
  return {};
}

}  // namespace ballot::coding
