#include "attacks/gradient_attacks.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/enforce.h"
#include "kernels/sign_kernels.h"

namespace ballot::attacks {
namespace {

std::size_t dimension_of(const GradientContext& ctx) {
  const std::size_t d = ctx.honest.n() > 0 ? ctx.honest.d() : ctx.own.size();
  BALLOT_ENFORCE(ctx.own.empty() || ctx.own.size() == d, "the attacker's own vector has another dimension");
  return d;
}

bool is_gradient_kind(AttackKind kind) { return domain_of(kind) == Domain::kGradient || kind == AttackKind::kNone; }

}  // namespace

double normal_quantile(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0) return -std::numeric_limits<double>::infinity();
  if (p == 1) return std::numeric_limits<double>::infinity();
  // Acklam's rational approximations (relative error < 1.15e-9) on three regions.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - kLow) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Φ(x) − p with Φ(x) = erfc(−x/√2)/2 (cubic convergence: from 1e-9 to the
  // rounding of erfc). In the upper tail work with the complement to keep relative accuracy.
  constexpr double kSqrt2Pi = 2.5066282746310002;
  const double e = p > 0.5 ? (1 - p) - 0.5 * std::erfc(x / std::sqrt(2.0)) : 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * kSqrt2Pi * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double alie_z(std::size_t n, std::size_t m) {
  BALLOT_ENFORCE_LT(m, n);
  const double honest = static_cast<double>(n - m);
  // s* = ⌊n/2 + 1⌋ − m: the honest supporters the attackers need for a majority (may be ≤ 0).
  const double s_star = std::floor(static_cast<double>(n) / 2 + 1) - static_cast<double>(m);
  double p = (honest - s_star) / honest;
  const double margin = 1 / (2 * honest);  // keeps z finite (see the header)
  p = std::min(std::max(p, margin), 1 - margin);
  return normal_quantile(p);
}

void honest_moments(const robust::InputMatrix& rows, std::vector<double>& mean, std::vector<double>* stddev) {
  const std::size_t n = rows.n(), d = rows.d();
  mean.assign(d, 0.0);
  if (stddev != nullptr) stddev->assign(d, 0.0);
  if (n == 0) return;
  // Welford, one pass over the input: each row block is read once, contiguously. Blocked over
  // coordinates so that the accumulators of a block (2 × kBlock doubles = 64 KiB) stay in L2
  // while every row streams through it; unblocked, the 16·d bytes of accumulators would be
  // re-read and re-written from memory once per row. A row's chunk spans 4 pages, so the
  // hardware prefetcher has a run to follow (1024-coordinate chunks, one page, measured slower). The per-coordinate
  // updates are independent, so the inner loops vectorise (this file is built with -O3; no reassociation, so the result
  // is the same as the plain loop's).
  constexpr std::size_t kBlock = 4096;
  double* const mu_all = mean.data();
  double* const m2_all = stddev != nullptr ? stddev->data() : nullptr;
  for (std::size_t begin = 0; begin < d; begin += kBlock) {
    const std::size_t len = std::min(kBlock, d - begin);
    double* __restrict mu = mu_all + begin;
    double* __restrict m2 = m2_all != nullptr ? m2_all + begin : nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      const float* __restrict x = rows.row(i) + begin;
      const double inv = 1.0 / static_cast<double>(i + 1);
      if (m2 == nullptr) {
        // Mean only: a plain double sum of floats (relative error ≤ n·2⁻⁵³, no cancellation
        // issue without the second moment), half the operations of Welford's update.
        for (std::size_t c = 0; c < len; ++c) mu[c] += static_cast<double>(x[c]);
      } else {
        for (std::size_t c = 0; c < len; ++c) {
          const double value = x[c];
          const double delta = value - mu[c];
          mu[c] += delta * inv;
          m2[c] += delta * (value - mu[c]);
        }
      }
    }
  }
  const double inv_n = 1.0 / static_cast<double>(n);
  if (m2_all != nullptr) {
    for (std::size_t c = 0; c < d; ++c) m2_all[c] = std::sqrt(std::max(m2_all[c] * inv_n, 0.0));
  } else {
    for (std::size_t c = 0; c < d; ++c) mu_all[c] *= inv_n;
  }
}

void craft_gradient(const Behaviour& b, const GradientContext& ctx, Rng& rng, std::vector<float>& out) {
  BALLOT_ENFORCE(is_gradient_kind(b.kind), "not a gradient-domain attack: " + std::string(attack_kind_name(b.kind)));
  const std::size_t d = dimension_of(ctx);
  out.resize(d);
  std::vector<double> mean;
  // λ·own, or λ·ḡ when the attacker's own vector is unknown.
  const auto scaled_own = [&](double lambda) {
    if (!ctx.own.empty()) {
      for (std::size_t c = 0; c < d; ++c) out[c] = static_cast<float>(lambda * ctx.own[c]);
      return;
    }
    honest_moments(ctx.honest, mean, nullptr);
    for (std::size_t c = 0; c < d; ++c) out[c] = static_cast<float>(lambda * mean[c]);
  };
  switch (b.kind) {
    case AttackKind::kNone:
      BALLOT_ENFORCE_EQ(ctx.own.size(), d);
      std::copy(ctx.own.begin(), ctx.own.end(), out.begin());
      return;
    case AttackKind::kSignFlip:
      scaled_own(-1.0);
      return;
    case AttackKind::kScaled:
      scaled_own(b.factor);
      return;
    case AttackKind::kGaussian:
      for (std::size_t c = 0; c < d; ++c) out[c] = static_cast<float>(b.sigma * rng.normal());
      return;
    case AttackKind::kZero:
      std::fill(out.begin(), out.end(), 0.0f);
      return;
    case AttackKind::kAlie: {
      // Baruch et al. 2019: ḡ − z·s; every attacker computes the same vector from the same view.
      const double z = std::isnan(b.z) ? alie_z(ctx.n, ctx.m) : b.z;
      std::vector<double> stddev;
      honest_moments(ctx.honest, mean, &stddev);
      for (std::size_t c = 0; c < d; ++c) out[c] = static_cast<float>(mean[c] - z * stddev[c]);
      return;
    }
    case AttackKind::kIpm:
      // Xie et al. 2019: −ε·ḡ (inner product with the true gradient negative for any ε > 0).
      honest_moments(ctx.honest, mean, nullptr);
      for (std::size_t c = 0; c < d; ++c) out[c] = static_cast<float>(-b.epsilon * mean[c]);
      return;
    case AttackKind::kMimic: {
      BALLOT_ENFORCE_GT(ctx.honest.n(), std::size_t{0});
      const float* row = ctx.honest.row(b.target % ctx.honest.n());
      std::copy(row, row + d, out.begin());
      return;
    }
    default:
      BALLOT_ENFORCE(false, "unreachable");
  }
}

void craft_vote(const Behaviour& b, const GradientContext& ctx, Rng& rng, BitVector& vote) {
  switch (b.kind) {
    case AttackKind::kReverse:
      BALLOT_ENFORCE_EQ(ctx.own.size(), dimension_of(ctx));
      kernels::pack_signs(ctx.own, vote);
      vote.flip();
      return;
    case AttackKind::kRandomSign:
      vote.resize(dimension_of(ctx));
      for (auto& word : vote.words()) word = rng.next_u64();
      vote.clear_padding();
      return;
    case AttackKind::kDirectional:
      vote.resize(dimension_of(ctx));
      vote.fill(b.direction);
      return;
    default: {
      BALLOT_ENFORCE(is_gradient_kind(b.kind), "no vote for attack " + std::string(attack_kind_name(b.kind)));
      std::vector<float> crafted;
      craft_gradient(b, ctx, rng, crafted);
      kernels::pack_signs(crafted, vote);
      return;
    }
  }
}

}  // namespace ballot::attacks
