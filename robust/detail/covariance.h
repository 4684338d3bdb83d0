// Internal: the largest eigenvalue of a (weighted) empirical covariance matrix of some inputs, and
// the projections of those inputs on its eigenvector, computed from the inputs' Gram matrix (CAF and
// SMEA). Not part of the public API; no Eigen types.
#pragma once

#include <cstddef>
#include <vector>

namespace ballot::robust::detail {

struct CovarianceTop {
  double value = 0;                // λ_max(Σ_w) ≥ 0
  std::vector<double> projection;  // (x_{rows[a]} − μ_w)·v per row (when asked; zeros when λ = 0)
};

// Σ_w = Σ_a w_a (x_a − μ_w)(x_a − μ_w)ᵀ / Σ_a w_a with μ_w = Σ_a w_a x_a / Σ_a w_a, over the inputs
// `rows` (indices into the n×n Gram matrix `gram`) with weights w_a > 0 (`weights`, one per row).
// Cost O(m³) for m rows, independent of d. Deterministic.
CovarianceTop weighted_covariance_top(const std::vector<double>& gram, std::size_t n,
                                      const std::vector<std::size_t>& rows, const std::vector<double>& weights,
                                      bool projections);

}  // namespace ballot::robust::detail
