#include "kernels/update.h"

#include "core/enforce.h"
#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels {
namespace {

void run(std::span<float> params, const std::uint64_t* signs, const float* direction, std::span<float> buffer,
         const SgdFactors& factors, bool first_step) {
  if (factors.momentum != 0.0f) BALLOT_ENFORCE_EQ(buffer.size(), params.size());
  detail::active_kernels().update(params.data(), factors.momentum != 0.0f ? buffer.data() : nullptr, direction, signs,
                                  params.size(), factors, first_step);
}

}  // namespace

void apply_update(std::span<float> params, const BitVector& vote, std::span<float> buffer, const SgdFactors& factors,
                  bool first_step) {
  BALLOT_ENFORCE_EQ(vote.size(), params.size());
  run(params, vote.data(), nullptr, buffer, factors, first_step);
}

void apply_update(std::span<float> params, std::span<const float> direction, std::span<float> buffer,
                  const SgdFactors& factors, bool first_step) {
  BALLOT_ENFORCE_EQ(direction.size(), params.size());
  run(params, nullptr, direction.data(), buffer, factors, first_step);
}

}  // namespace ballot::kernels
