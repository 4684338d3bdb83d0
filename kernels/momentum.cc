#include "kernels/momentum.h"

#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels {

void signum_momentum(std::span<float> momentum, std::span<const float> gradient, MomentumFactors factors) {
  BALLOT_ENFORCE_EQ(momentum.size(), gradient.size());
  detail::active_kernels().momentum(momentum.data(), gradient.data(), momentum.size(), factors.keep, factors.mix);
}

}  // namespace ballot::kernels
