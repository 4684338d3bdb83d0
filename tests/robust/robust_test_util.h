// Test helpers for the robust rules: seeded inputs and brute-force references written for
// clarity (full sorts, explicit loops in double), never sharing code with the library.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "robust/aggregator.h"

namespace ballot::robust::testing {

// n rows of d floats, N(center, scale²) per coordinate.
inline std::vector<float> gaussian_rows(std::size_t n, std::size_t d, std::uint64_t seed, double scale = 1.0,
                                        double center = 0.0) {
  Rng rng(seed);
  std::vector<float> out(n * d);
  for (auto& v : out) v = static_cast<float>(center + scale * rng.normal());
  return out;
}

inline std::vector<float> column(const std::vector<float>& rows, std::size_t n, std::size_t d, std::size_t c) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = rows[i * d + c];
  return out;
}

inline double squared_distance(const float* a, const float* b, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += (static_cast<double>(a[j]) - b[j]) * (static_cast<double>(a[j]) - b[j]);
  return s;
}

inline std::vector<float> mean_of_rows(const std::vector<float>& rows, std::size_t d,
                                       const std::vector<std::size_t>& which) {
  std::vector<double> acc(d, 0.0);
  for (std::size_t i : which)
    for (std::size_t j = 0; j < d; ++j) acc[j] += rows[i * d + j];
  std::vector<float> out(d);
  for (std::size_t j = 0; j < d; ++j) out[j] = static_cast<float>(acc[j] / static_cast<double>(which.size()));
  return out;
}

// Brute-force Krum scores over the rows `candidates` (full sort of each distance list).
inline std::vector<double> brute_krum_scores(const std::vector<float>& rows, std::size_t d,
                                             const std::vector<std::size_t>& candidates, std::size_t f) {
  const std::size_t c = candidates.size();
  const std::size_t k = c > f + 2 ? c - f - 2 : 0;
  std::vector<double> scores;
  for (std::size_t a : candidates) {
    std::vector<double> dist;
    for (std::size_t b : candidates)
      if (b != a) dist.push_back(squared_distance(&rows[a * d], &rows[b * d], d));
    std::sort(dist.begin(), dist.end());
    scores.push_back(std::accumulate(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(k), 0.0));
  }
  return scores;
}

// The largest eigenvalue of the weighted covariance Σ_i w_i (x_i − μ)(x_i − μ)ᵀ / Σ w_i (μ the
// weighted mean) over the rows with w_i > 0, and a unit eigenvector: the d×d matrix formed
// explicitly and diagonalised by cyclic Jacobi rotations (small d only).
struct BruteEigen {
  double value = 0;
  std::vector<double> vector;
  std::vector<double> mean;
};
inline BruteEigen brute_covariance_top(const std::vector<float>& rows, std::size_t d, const std::vector<double>& w) {
  const std::size_t n = w.size();
  double total = 0;
  for (double x : w) total += x;
  BruteEigen out;
  out.mean.assign(d, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < d; ++j) out.mean[j] += w[i] * rows[i * d + j] / total;
  std::vector<double> a(d * d, 0.0), v(d * d, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t r = 0; r < d; ++r)
      for (std::size_t c = 0; c < d; ++c)
        a[r * d + c] += w[i] * (rows[i * d + r] - out.mean[r]) * (rows[i * d + c] - out.mean[c]) / total;
  for (std::size_t r = 0; r < d; ++r) v[r * d + r] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (std::size_t r = 0; r < d; ++r)
      for (std::size_t c = r + 1; c < d; ++c) off += a[r * d + c] * a[r * d + c];
    if (off < 1e-30) break;
    for (std::size_t p = 0; p < d; ++p)
      for (std::size_t q = p + 1; q < d; ++q) {
        if (a[p * d + q] == 0) continue;
        const double theta = (a[q * d + q] - a[p * d + p]) / (2 * a[p * d + q]);
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (std::size_t k = 0; k < d; ++k) {  // columns p, q of A·J
          const double akp = a[k * d + p], akq = a[k * d + q];
          a[k * d + p] = c * akp - s * akq;
          a[k * d + q] = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < d; ++k) {  // rows p, q of Jᵀ·(A·J)
          const double apk = a[p * d + k], aqk = a[q * d + k];
          a[p * d + k] = c * apk - s * aqk;
          a[q * d + k] = s * apk + c * aqk;
        }
        for (std::size_t k = 0; k < d; ++k) {
          const double vkp = v[k * d + p], vkq = v[k * d + q];
          v[k * d + p] = c * vkp - s * vkq;
          v[k * d + q] = s * vkp + c * vkq;
        }
      }
  }
  std::size_t top = 0;
  for (std::size_t r = 1; r < d; ++r)
    if (a[r * d + r] > a[top * d + top]) top = r;
  out.value = std::max(0.0, a[top * d + top]);
  for (std::size_t r = 0; r < d; ++r) out.vector.push_back(v[r * d + top]);
  return out;
}

inline void expect_near_vectors(std::span<const float> got, const std::vector<float>& want, double tolerance,
                                const char* what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t j = 0; j < got.size(); ++j)
    ASSERT_NEAR(got[j], want[j], tolerance * (1.0 + std::abs(want[j]))) << what << " coordinate " << j;
}

// Runs the test body at each ISA level the CPU supports, restoring the cap afterwards.
template <typename Body>
void for_each_isa(Body body) {
  for (auto isa : kernels::supported_isas()) {
    kernels::ScopedIsaLimit cap(isa);
    SCOPED_TRACE(std::string(kernels::isa_name(isa)));
    body();
  }
}

}  // namespace ballot::robust::testing
