#include "kernels/sign_kernels.h"

#include "core/enforce.h"
#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels {

void pack_signs(std::span<const float> values, BitVector& out) {
  if (out.size() != values.size()) out = BitVector(values.size());
  detail::active_kernels().pack(values.data(), values.size(), out.data());
}

void pack_signs_at(std::span<const float> values, std::size_t offset, BitVector& out) {
  BALLOT_ENFORCE(offset % 64 == 0 && offset <= out.size() && values.size() <= out.size() - offset &&
                     ((offset + values.size()) % 64 == 0 || offset + values.size() == out.size()),
                 "a piece of signs starts at a multiple of 64 and ends at one or at the end");
  detail::active_kernels().pack(values.data(), values.size(), out.data() + offset / 64);
}

BitVector pack_signs(std::span<const float> values) {
  BitVector out(values.size());
  detail::active_kernels().pack(values.data(), values.size(), out.data());
  return out;
}

void unpack_signs(const BitVector& signs, std::span<float> out, float scale) {
  BALLOT_ENFORCE_EQ(signs.size(), out.size());
  detail::active_kernels().unpack(signs.data(), 0, signs.size(), -scale, scale, out.data());
}

void unpack_signs(const BitVector& signs, const GradientLayout& layout, std::span<const float> layer_scales,
                  std::span<float> out) {
  BALLOT_ENFORCE_EQ(signs.size(), out.size());
  BALLOT_ENFORCE_EQ(layout.total_size(), signs.size());
  BALLOT_ENFORCE_EQ(layer_scales.size(), layout.num_layers());
  const auto& kernels = detail::active_kernels();
  for (std::size_t l = 0; l < layout.num_layers(); ++l) {
    const LayerSegment& segment = layout.layer(l);
    kernels.unpack(signs.data(), segment.offset, segment.size, -layer_scales[l], layer_scales[l],
                   out.data() + segment.offset);
  }
}

std::size_t agreement_count(const BitVector& a, const BitVector& b) {
  BALLOT_ENFORCE_EQ(a.size(), b.size());
  return detail::active_kernels().agree(a.data(), b.data(), a.size());
}

}  // namespace ballot::kernels
