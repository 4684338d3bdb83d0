#include "coding/codec.h"

#include <bit>
#include <cstdint>

#include "coding/codec_registry.h"

namespace ballot::coding {

const char* granularity_name(Granularity granularity) noexcept {
  return granularity == Granularity::kLayer ? "layer" : "model";
}

const char* codec_id_name(CodecId id) noexcept {
  const CodecEntry* entry = find_codec(id);
  return entry != nullptr ? entry->name.data() : "unknown";  // table names are string literals
}

Result<std::vector<float>> Codec::decode(std::span<const std::uint8_t> bytes, const GradientLayout& layout) const {
  std::vector<float> out(layout.total_size(), 0.0f);
  BALLOT_TRY(decode_add(bytes, layout, out, 1.0f));
  return out;
}

Result<SparseGradient> Codec::decode_entries(std::span<const std::uint8_t> bytes, const GradientLayout& layout) const {
  BALLOT_ASSIGN_OR_RETURN(const auto dense, decode(bytes, layout));
  SparseGradient out;
  for (std::size_t i = 0; i < dense.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(dense[i]) == 0) continue;  // +0
    out.indices.push_back(i);
    out.values.push_back(dense[i]);
  }
  return out;
}

Status Codec::load_state(std::span<const std::uint8_t> state, const GradientLayout&) {
  if (!state.empty()) {
    return make_error(ErrorCode::kMalformed, std::string("codec ") + codec_id_name(id()) + " is stateless but got " +
                                                 std::to_string(state.size()) + " bytes of state");
  }
  return {};
}

}  // namespace ballot::coding
