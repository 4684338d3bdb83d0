// The per-coordinate loops of the codecs (declared in coding/detail/blocks.h). Each function is
// cloned for AVX-512, AVX2 and the baseline and picked by the CPU at load time (target_clones).
// The loops use independent lanes and IEEE operations only (this file is compiled with
// -ffp-contract=off), so every clone returns the same bits as the baseline.
#include <cmath>
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>

#include "coding/detail/blocks.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define BALLOT_CODEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BALLOT_CODEC_CLONES
#endif

namespace ballot::coding::detail {

namespace {
constexpr int kLanes = 16;

template <typename Lane>
double combine(const Lane (&lanes)[kLanes]) {
  double total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}
}  // namespace

BALLOT_CODEC_CLONES double sum_abs(const float* x, std::size_t n) {
  double lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += std::fabs(static_cast<double>(x[i + j]));
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += std::fabs(static_cast<double>(x[i]));
  return combine(lanes);
}

BALLOT_CODEC_CLONES double sum_squares(const float* x, std::size_t n) {
  double lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double v = x[i + j];
      lanes[j] += v * v;
    }
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += static_cast<double>(x[i]) * x[i];
  return combine(lanes);
}

BALLOT_CODEC_CLONES double sum_values(const float* x, std::size_t n) {
  double lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += x[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += x[i];
  return combine(lanes);
}

BALLOT_CODEC_CLONES float max_abs(const float* x, std::size_t n) {
  float lanes[kLanes] = {};
  std::int32_t nan[kLanes] = {};  // NaN tracked apart: the max itself ignores it
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float a = std::fabs(x[i + j]);
      lanes[j] = a > lanes[j] ? a : lanes[j];
      nan[j] |= a != a;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const float a = std::fabs(x[i]);
    lanes[j] = a > lanes[j] ? a : lanes[j];
    nan[j] |= a != a;
  }
  float m = 0;
  bool any_nan = false;
  for (int j = 0; j < kLanes; ++j) {
    m = lanes[j] > m ? lanes[j] : m;
    any_nan |= nan[j] != 0;
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

BALLOT_CODEC_CLONES static std::size_t count_negative(const float* x, std::size_t n) {
  std::uint32_t lanes[kLanes] = {};
  std::size_t total = 0;
  std::size_t i = 0;
  while (i + kLanes <= n) {
    // Chunks of at most 2^20 rows so that the 32-bit lanes cannot overflow.
    const std::size_t stop = std::min(n - (n - i) % kLanes, i + (std::size_t{1} << 24));
    for (; i < stop; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += x[i + j] < 0.0f ? 1u : 0u;
    }
    for (auto& lane : lanes) {
      total += lane;
      lane = 0;
    }
  }
  for (; i < n; ++i) total += x[i] < 0.0f ? 1u : 0u;
  return total;
}

SplitSums split_sums(const float* x, std::size_t n) {
  // Σ_{x>=0} x = (Σx + Σ|x|)/2 and Σ_{x<0} x = (Σx − Σ|x|)/2, from two vectorised reductions
  // (the block is in cache); NaN propagates into both.
  const double total = sum_values(x, n), magnitude = sum_abs(x, n);
  return SplitSums{(total + magnitude) / 2, (total - magnitude) / 2,
                   static_cast<double>(count_negative(x, n))};
}

BALLOT_CODEC_CLONES void qsgd_levels(const float* x, const float* u, std::size_t n, float inv,
                                     float s, std::uint32_t* level) {
  for (std::size_t i = 0; i < n; ++i) {
    float r = std::fabs(x[i]) * inv;
    r = r >= 0.0f ? (r < s ? r : s) : 0.0f;
    const std::int32_t whole = static_cast<std::int32_t>(r);
    const float l = static_cast<float>(whole);
    level[i] = static_cast<std::uint32_t>(whole) + (u[i] < r - l ? 1u : 0u);
  }
}

BALLOT_CODEC_CLONES void level_plane(const std::uint32_t* level, std::size_t n, int p, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = ((level[i] >> p) & 1u) ? 1.0f : -1.0f;
}

BALLOT_CODEC_CLONES void terngrad_keep(const float* x, const float* u, std::size_t n, float limit,
                                       float inv, float* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    const float clipped = a < limit ? a : limit;
    out[i] = u[i] < clipped * inv ? 1.0f : -1.0f;
  }
}

BALLOT_CODEC_CLONES void add_plane(const float* bit, std::size_t n, float value, float* level) {
  for (std::size_t i = 0; i < n; ++i) level[i] += bit[i] > 0 ? value : 0.0f;
}

}  // namespace ballot::coding::detail
