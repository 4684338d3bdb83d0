#include "robust/arc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "robust/detail/common.h"

namespace ballot::robust {

Status AdaptiveRobustClipping::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "arc needs at least one input");
  if (n < 2 * f + 1) return detail::precondition_error("arc", "n >= 2f + 1", n, f);
  return {};
}

std::size_t AdaptiveRobustClipping::clipped(std::size_t n, std::size_t f) {
  return n == 0 ? 0 : 2 * f * (n - std::min(f, n)) / n;
}

std::string AdaptiveRobustClipping::spec() const {
  return detail::with_threads("arc:f=" + std::to_string(options_.f), options_.threads);
}

Result<PreAggregation> AdaptiveRobustClipping::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& kern = detail::isa_kernels();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Non-finite inputs get norm +∞. The kernel sums squares in float lanes, which overflow for
  // finite inputs near the float range: those (rare) are summed again in double, which cannot
  // overflow, so that they are clipped like any other input.
  std::vector<double> norm(n);
  detail::parallel_for(n, options_.threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const float* x = inputs.row(i);
      double squared = kern.squared_norm(x, d);
      if (!std::isfinite(squared) && kern.all_finite(x, d)) {
        squared = 0;
        for (std::size_t j = 0; j < d; ++j) squared += static_cast<double>(x[j]) * x[j];
      }
      norm[i] = std::isfinite(squared) ? std::sqrt(squared) : kInf;
    }
  });
  // Allouah et al. (ARC): k = ⌊2(f/n)(n − f)⌋ and C = ‖x_{π(k+1)}‖, π sorting the norms in
  // non-increasing order; k < n because 2f(n − f) ≤ n²/2.
  const std::size_t k = clipped(n, options_.f);
  std::vector<double> sorted = norm;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end(),
                   std::greater<double>());
  const double threshold = sorted[k];

  PreAggregation out;
  out.output.n = n;
  out.output.d = d;
  out.output.values.resize(n * d);
  detail::parallel_for(n, options_.threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      float* dst = out.output.values.data() + i * d;
      if (norm[i] == kInf || !(norm[i] > threshold)) {
        std::memcpy(dst, inputs.row(i), d * sizeof(float));
        continue;
      }
      kern.scale_copy(static_cast<float>(threshold / norm[i]), inputs.row(i), dst, d);
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (norm[i] == kInf) out.non_finite.push_back(i);
  return out;
}

}  // namespace ballot::robust
