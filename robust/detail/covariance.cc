#include "robust/detail/covariance.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>

namespace ballot::robust::detail {

// The covariance is d×d, but it is BᵀB for the m×d matrix B whose row a is √(w_a / S)·(x_a − μ_w)
// (S = Σ w). BᵀB and BBᵀ have the same nonzero eigenvalues, and if BBᵀu = λu then v = Bᵀu / √λ is a
// unit eigenvector of BᵀB. BBᵀ = W^{1/2} K W^{1/2} / S, where K is the Gram matrix of the centred
// inputs, K_ab = G_ab − g_a − g_b + q with g_a = Σ_c (w_c / S) G_ac and q = Σ_a (w_a / S) g_a. So
// the m×m symmetric eigenproblem (Eigen's SelfAdjointEigenSolver) gives λ_max exactly, without ever
// forming a d-vector, and (x_a − μ_w)·v = (K W^{1/2} u)_a / √(S λ).
CovarianceTop weighted_covariance_top(const std::vector<double>& gram, std::size_t n,
                                      const std::vector<std::size_t>& rows, const std::vector<double>& weights,
                                      bool projections) {
  const auto m = static_cast<Eigen::Index>(rows.size());
  CovarianceTop out;
  if (projections) out.projection.assign(rows.size(), 0.0);
  if (m == 0) return out;
  double total = 0;
  for (double w : weights) total += w;
  Eigen::VectorXd g(m), root(m);
  for (Eigen::Index a = 0; a < m; ++a) {
    double s = 0;
    for (Eigen::Index c = 0; c < m; ++c) s += weights[c] * gram[rows[a] * n + rows[c]];
    g(a) = s / total;
    root(a) = std::sqrt(weights[a]);
  }
  double q = 0;
  for (Eigen::Index a = 0; a < m; ++a) q += weights[a] * g(a);
  q /= total;
  Eigen::MatrixXd centred(m, m), scaled(m, m);
  for (Eigen::Index a = 0; a < m; ++a)
    for (Eigen::Index b = 0; b <= a; ++b) {
      const double k = gram[rows[a] * n + rows[b]] - g(a) - g(b) + q;
      centred(a, b) = centred(b, a) = k;
      scaled(a, b) = scaled(b, a) = root(a) * root(b) * k / total;
    }
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(
      scaled, projections ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
  // Eigenvalues come in increasing order; rounding can leave a zero spectrum slightly negative.
  out.value = std::max(0.0, solver.eigenvalues()(m - 1));
  if (!projections || !(out.value > 0)) return out;
  const Eigen::VectorXd u = solver.eigenvectors().col(m - 1);
  const Eigen::VectorXd p = centred * root.cwiseProduct(u) / std::sqrt(total * out.value);
  for (Eigen::Index a = 0; a < m; ++a) out.projection[a] = p(a);
  return out;
}

}  // namespace ballot::robust::detail
