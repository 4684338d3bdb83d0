// Per-coordinate logic of the CUDA coordinate-wise rules (robust/cuda/robust_cuda.h), marked
// BALLOT_HOST_DEVICE: the kernels run it on the GPU and the tests run the same code on the host
// against the CPU rules (robust/coordinate_wise.h), so the GPU adds only the memory traffic.
//
// What the CPU computes for n ≤ 128 (robust/detail/common.cc, robust/detail/isa_kernels.inc), and
// so what this computes:
//  - a row with a NaN or ±Inf anywhere is left out of every coordinate; with k such rows the rule
//    runs on the other m = n − k rows with f − min(k, f) (the mean with f = 0);
//  - every sum is in double, starting from +0.0, adding the floats one by one in order (the rows in
//    row order for the mean, the sorted values in ascending rank order otherwise), and the result
//    is float(sum · (1.0 / count)), each step rounded to nearest;
//  - median: the mean of ranks (m − 1)/2 … m/2 (one or two values); trimmed mean: of ranks
//    [t, m − t), t = f − min(k, f);
//  - MeaMed (closest window, w = m − t values): median = low·0.5f + high·0.5f in float, the window
//    start: the first s in [first, last) (window_ranks of common.cc) with
//    median − x[s] <= x[s + w] − median, else last (the w values closest to the median, the lower
//    value on a tie in distance), scanning from start 0 instead when x[first − 1] == x[first]; the window summed into
//    four double accumulators, rank r into (r − first) mod 4, combined as (s0 + s1) + (s2 + s3).
// A thread keeps one coordinate of every row in kWires registers (+∞ in the slots of rows it does
// not use), so every array index is a compile-time constant: loops over slots are fold
// expressions (static_for), never runtime-indexed (a runtime index would put the array on the
// stack; the ptxas ctest forbids that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#include "core/host_device.h"
#include "kernels/update_logic.h"

namespace ballot::robust::cuda {

// Mirrors robust::detail::CoordinateOp.
enum class CoordinateOp : int { kMean = 0, kMedian = 1, kTrimmedMean = 2, kClosestWindow = 3 };

// Slots per thread for n rows: 8, 16, 24, 32, 48 or 64, the smallest at least n. At most 64 rows
// (one 64-bit row mask).
inline constexpr int kMaxRows = 64;
BALLOT_HOST_DEVICE constexpr int wires_for(int n) {
  return n <= 8 ? 8 : n <= 16 ? 16 : n <= 24 ? 24 : n <= 32 ? 32 : n <= 48 ? 48 : 64;
}

// Double arithmetic rounded to nearest, never contracted.
BALLOT_HOST_DEVICE inline double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
BALLOT_HOST_DEVICE inline double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
BALLOT_HOST_DEVICE inline double ddiv_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

BALLOT_HOST_DEVICE inline float infinity() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7f800000);
#else
  return std::numeric_limits<float>::infinity();
#endif
}
BALLOT_HOST_DEVICE inline float quiet_nan() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7fc00000);
#else
  return std::numeric_limits<float>::quiet_NaN();
#endif
}

// The CPU's test: the exponent bits all ones.
BALLOT_HOST_DEVICE inline bool non_finite(float v) {
#if defined(__CUDA_ARCH__)
  const unsigned bits = __float_as_uint(v);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
#endif
  return (bits & 0x7f800000u) == 0x7f800000u;
}

BALLOT_HOST_DEVICE inline int popcount64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}

// The CPU's mean of a sum: float(sum · (1.0 / count)).
BALLOT_HOST_DEVICE inline float scaled_mean(double sum, int count) {
  return static_cast<float>(dmul_rn(sum, ddiv_rn(1.0, static_cast<double>(count))));
}

// f(std::integral_constant<int, I>{}) for I = 0 … N − 1, unrolled by construction.
template <typename F, int... I>
BALLOT_HOST_DEVICE inline void static_for_each(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
BALLOT_HOST_DEVICE inline void static_for(F&& f) {
  static_for_each(f, std::make_integer_sequence<int, N>{});
}

// Batcher's odd–even merge sort on the next power of two ≥ kWires wires, without the comparators
// that touch a wire ≥ kWires (they would only meet +∞ there: no-ops), enumerated as
// robust/detail/common.cc does before it prunes to the needed ranks. It sorts any kWires values.
struct WireComparator {
  int lo = 0;
  int hi = 0;
};
template <int kWires>
struct BatcherNetwork {
  template <typename Emit>
  static constexpr void enumerate(Emit&& emit) {
    int wires = 1;
    while (wires < kWires) wires *= 2;
    for (int p = 1; p < wires; p *= 2) {
      for (int k = p; k >= 1; k /= 2) {
        for (int j = k % p; j + k < wires; j += 2 * k) {
          for (int i = 0; i < k && i + j + k < wires; ++i) {
            if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < kWires) emit(i + j, i + j + k);
          }
        }
      }
    }
  }
  static constexpr int count() {
    int c = 0;
    enumerate([&c](int, int) { ++c; });
    return c;
  }
  static constexpr int kSize = count();
  WireComparator comparators[kSize];
  constexpr BatcherNetwork() {
    int c = 0;
    enumerate([this, &c](int lo, int hi) { comparators[c++] = WireComparator{lo, hi}; });
  }
};
template <int kWires>
inline constexpr BatcherNetwork<kWires> kBatcherNetwork{};
// Comparator kIndex as scalar constants (device code may read constexpr scalars, not arrays).
template <int kWires, int kIndex>
struct ComparatorAt {
  static constexpr int lo = kBatcherNetwork<kWires>.comparators[kIndex].lo;
  static constexpr int hi = kBatcherNetwork<kWires>.comparators[kIndex].hi;
};

// Wire lo receives the minimum. On the values the network sees in a result (all finite) this is
// the CPU's y < x ? y : x and its max, up to the sign of a zero, which no sum below can see.
BALLOT_HOST_DEVICE inline void compare_exchange(float& lo, float& hi) {
#if defined(__CUDA_ARCH__)
  const float low = fminf(lo, hi);
  hi = fmaxf(lo, hi);
#else
  const float low = std::fmin(lo, hi);
  hi = std::fmax(lo, hi);
#endif
  lo = low;
}
template <int kWires, int... C>
BALLOT_HOST_DEVICE inline void apply_network(float (&v)[kWires], std::integer_sequence<int, C...>) {
  (compare_exchange(v[ComparatorAt<kWires, C>::lo], v[ComparatorAt<kWires, C>::hi]), ...);
}
template <int kWires>
BALLOT_HOST_DEVICE inline void sort_wires(float (&v)[kWires]) {
  apply_network(v, std::make_integer_sequence<int, BatcherNetwork<kWires>::kSize>{});
}

// What one call computes, the same for every coordinate: which rows are used, and the rule's
// ranks for m = popcount(rows).
struct CoordinatePlan {
  std::uint64_t rows = 0;  // bit i: row i is used
  int m = 0;
  int lo = 0, hi = 0;                   // kMedian, kTrimmedMean: the ranks averaged, [lo, hi)
  int window = 0, first = 0, last = 0;  // kClosestWindow: w and the window starts scanned
};
// n ≤ 64 rows of which `excluded` (bit i: row i) are non-finite; f as the CPU rule's options.
BALLOT_HOST_DEVICE inline CoordinatePlan plan_for(CoordinateOp op, int n, int f, std::uint64_t excluded) {
  CoordinatePlan plan;
  const std::uint64_t all = n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  plan.rows = all & ~excluded;
  plan.m = popcount64(plan.rows);
  const int m = plan.m, k = n - m;
  const int remaining = f - (k < f ? k : f);
  if (m == 0) return plan;
  if (op == CoordinateOp::kMedian) {
    plan.lo = (m - 1) / 2;
    plan.hi = m / 2 + 1;
  } else if (op == CoordinateOp::kTrimmedMean) {
    plan.lo = remaining;
    plan.hi = m - remaining;
  } else if (op == CoordinateOp::kClosestWindow) {
    const int w = m - remaining, lo_mid = (m - 1) / 2, hi_mid = m / 2;
    plan.window = w;
    plan.first = lo_mid + 1 >= w ? lo_mid + 1 - w : 0;
    plan.last = m - w < hi_mid ? m - w : hi_mid;
  }
  return plan;
}

// v[i] = column[i · stride] for the rows in `rows`, +∞ elsewhere; returns the rows read that hold
// a non-finite value.
template <int kWires>
BALLOT_HOST_DEVICE inline std::uint64_t gather_column(const float* column, std::size_t stride, std::uint64_t rows,
                                                      float (&v)[kWires]) {
  std::uint64_t bad = 0;
  static_for<kWires>([&](auto slot) {
    constexpr int r = decltype(slot)::value;
    if ((rows >> r) & 1u) {
      v[r] = column[static_cast<std::size_t>(r) * stride];
      bad |= static_cast<std::uint64_t>(non_finite(v[r])) << r;
    } else {
      v[r] = infinity();
    }
  });
  return bad;
}

// v[rank] for a rank known only at run time.
template <int kWires>
BALLOT_HOST_DEVICE inline float at_rank(const float (&v)[kWires], int rank) {
  float out = 0.0f;
  static_for<kWires>([&](auto slot) {
    constexpr int r = decltype(slot)::value;
    if (r == rank) out = v[r];
  });
  return out;
}

// The MeaMed reduction of a sorted column (the scalar path of isa_kernels.inc's
// closest_window_mean, which its vector path equals).
template <int kWires>
BALLOT_HOST_DEVICE inline float closest_window_mean(const float (&v)[kWires], const CoordinatePlan& plan) {
  const int m = plan.m, w = plan.window;
  const float median =
      kernels::add_rn(kernels::mul_rn(at_rank(v, (m - 1) / 2), 0.5f), kernels::mul_rn(at_rank(v, m / 2), 0.5f));
  int first = plan.first, last = plan.last;
  // The CPU redoes such a column with a full sort and every start (and accumulators r mod 4).
  if (first > 0 && at_rank(v, first - 1) == at_rank(v, first)) {
    first = 0;
    last = m - w;
  }
  // next[s] = v[s + w]: v shifted down by w, one power of two at a time (w ≤ kWires ≤ 64).
  float next[kWires];
  static_for<kWires>([&](auto slot) { next[decltype(slot)::value] = v[decltype(slot)::value]; });
  static_for<7>([&](auto bit) {
    constexpr int shift = 1 << decltype(bit)::value;
    if (shift < kWires && ((w >> decltype(bit)::value) & 1)) {
      static_for<kWires>([&](auto slot) {
        constexpr int s = decltype(slot)::value;
        if constexpr (s + shift < kWires) next[s] = next[s + shift];
      });
    }
  });
  int start = last;
  bool found = false;
  static_for<kWires>([&](auto slot) {
    constexpr int s = decltype(slot)::value;
    if (!found && s >= first && s < last) {
      const float below = kernels::sub_rn(median, v[s]);
      const float above = kernels::sub_rn(next[s], median);
      if (below <= above) start = s, found = true;
    }
  });
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  static_for<kWires>([&](auto slot) {
    constexpr int r = decltype(slot)::value;
    if (r >= start && r < start + w) {
      const int accumulator = (r - first) & 3;
      const double x = v[r];
      if (accumulator == 0) s0 = dadd_rn(s0, x);
      if (accumulator == 1) s1 = dadd_rn(s1, x);
      if (accumulator == 2) s2 = dadd_rn(s2, x);
      if (accumulator == 3) s3 = dadd_rn(s3, x);
    }
  });
  return scaled_mean(dadd_rn(dadd_rn(s0, s1), dadd_rn(s2, s3)), w);
}

// One output coordinate from its gathered column (sorted in place for the order statistics);
// NaN when no row is usable.
template <CoordinateOp kOp, int kWires>
BALLOT_HOST_DEVICE inline float reduce_coordinate(float (&v)[kWires], const CoordinatePlan& plan) {
  if (plan.m == 0) return quiet_nan();
  if constexpr (kOp == CoordinateOp::kMean) {
    double sum = 0.0;
    static_for<kWires>([&](auto slot) {
      constexpr int r = decltype(slot)::value;
      if ((plan.rows >> r) & 1u) sum = dadd_rn(sum, v[r]);
    });
    return scaled_mean(sum, plan.m);
  } else {
    sort_wires(v);
    if constexpr (kOp == CoordinateOp::kClosestWindow) {
      return closest_window_mean(v, plan);
    } else {
      double sum = 0.0;
      static_for<kWires>([&](auto slot) {
        constexpr int r = decltype(slot)::value;
        if (r >= plan.lo && r < plan.hi) sum = dadd_rn(sum, v[r]);
      });
      return scaled_mean(sum, plan.hi - plan.lo);
    }
  }
}

// The kernels' body for coordinate j of n rows of d floats (row i at inputs + i·d): out[j], and
// the rows read there that hold a non-finite value.
template <CoordinateOp kOp, int kWires>
BALLOT_HOST_DEVICE inline std::uint64_t reduce_column(const float* inputs, std::size_t d, std::size_t j,
                                                      const CoordinatePlan& plan, float* out) {
  float v[kWires];
  const std::uint64_t bad = gather_column(inputs + j, d, plan.rows, v);
  out[j] = reduce_coordinate<kOp>(v, plan);
  return bad;
}

}  // namespace ballot::robust::cuda
