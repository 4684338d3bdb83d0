// The per-coordinate loops of the codecs (declared in coding/detail/blocks.h). Each body is
// compiled for the baseline, AVX2 and AVX-512 (the compiler vectorises it for each) and the
// level is chosen per call by kernels::active_isa() (kernels/isa.h: the one ISA switch, capped
// by set_isa_limit or BALLOT_ISA). The loops use independent lanes and IEEE operations only
// (this file is compiled with -ffp-contract=off), so every level returns the same bits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "kernels/isa.h"

// BALLOT_CODEC_BODY(Ret, name, (params)) { body } then BALLOT_CODEC_DISPATCH(Ret, name, (params),
// (args)) define `Ret name(params)`: the body (always inlined) compiled once per level, and a
// dispatcher on kernels::active_isa().
#define BALLOT_CODEC_BODY(Ret, name, params) static inline __attribute__((always_inline)) Ret name##_body params
#if defined(__x86_64__)
#define BALLOT_CODEC_DISPATCH(Ret, name, params, args)                                            \
  static __attribute__((target("avx512f"))) Ret name##_avx512 params { return name##_body args; } \
  static __attribute__((target("avx2"))) Ret name##_avx2 params { return name##_body args; }      \
  Ret name params {                                                                               \
    switch (kernels::active_isa()) {                                                              \
      case kernels::Isa::kAvx512:                                                                 \
        return name##_avx512 args;                                                                \
      case kernels::Isa::kAvx2:                                                                   \
        return name##_avx2 args;                                                                  \
      case kernels::Isa::kScalar:                                                                 \
        break;                                                                                    \
    }                                                                                             \
    return name##_body args;                                                                      \
  }
#else
#define BALLOT_CODEC_DISPATCH(Ret, name, params, args) \
  Ret name params { return name##_body args; }
#endif

namespace ballot::coding::detail {

namespace {
constexpr int kLanes = kSumLanes;

// One 64-byte line per 16 floats, 4 KiB ahead: on this class of VM the hardware prefetcher alone
// leaves a streaming reduction well below the read bandwidth (kernels/ pack_signs does the same).
// A prefetch past the end of the buffer is harmless (it never faults).
inline void prefetch(const float* at) { __builtin_prefetch(at + 1024); }

template <typename Lane>
double combine(const Lane (&lanes)[kLanes]) {
  double total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}
}  // namespace

// The terms of the chunked sums.
struct AbsTerm {
  double operator()(float v) const { return std::fabs(static_cast<double>(v)); }
};
struct SquareTerm {
  double operator()(float v) const {
    const double d = v;
    return d * d;
  }
};
struct ValueTerm {
  double operator()(float v) const { return static_cast<double>(v); }
};
// The two sides of a sign stream: x where it packs as bit 1 (x ≥ 0, −0, NaN), x where it packs as 0.
struct NonNegativeTerm {
  double operator()(float v) const { return v < 0.0f ? 0.0 : static_cast<double>(v); }
};
struct NegativeTerm {
  double operator()(float v) const { return v < 0.0f ? static_cast<double>(v) : 0.0; }
};

// The run's first coordinates up to a lane-group boundary (phase + t ≡ 0 mod 16), one lane each;
// returns how many. Kept out of add_lanes: in the same function, GCC 12 at -O3 split the main
// loop's 16 lanes into 8 + 2 + 4 + 2 vectors (≈ 1.5× the time).
template <typename Term>
static __attribute__((noinline)) std::size_t add_head(const float* x, std::size_t n, std::size_t phase, double* lanes,
                                                      Term term) {
  std::size_t t = 0;
  for (; t < n && (phase + t) % kLanes != 0; ++t) lanes[(phase + t) % kLanes] += term(x[t]);
  return t;
}

// lanes[(phase + t) mod 16] += term(x_t) for t < n, each lane in coordinate order: a run of a
// chunk that starts `phase` coordinates into it. The lanes live in a local array through the main
// loop, so GCC keeps them in two vector registers (a lane array declared inside the chunk loop of
// chunked_sum left the reduction scalar, at a third of the speed).
template <typename Term>
static inline __attribute__((always_inline)) void add_lanes(const float* x, std::size_t n, std::size_t phase,
                                                            double* lanes, Term term) {
  std::size_t t = phase % kLanes == 0 ? 0 : add_head(x, n, phase, lanes, term);
  double own[kLanes];
  for (int j = 0; j < kLanes; ++j) own[j] = lanes[j];
  for (; t + kLanes <= n; t += kLanes) {
    prefetch(x + t);
    for (int j = 0; j < kLanes; ++j) own[j] += term(x[t + j]);
  }
  for (int j = 0; t < n; ++t, ++j) own[j] += term(x[t]);
  for (int j = 0; j < kLanes; ++j) lanes[j] = own[j];
}

namespace {

// The lanes of one run for each term, compiled per ISA level. Each is called once per chunk: inlined
// into a loop over the chunks, the same loop was left mostly scalar by GCC 12 (a third of the speed).
#define BALLOT_CODEC_LANES(name, Term)                                                                 \
  BALLOT_CODEC_BODY(void, name, (const float* x, std::size_t n, std::size_t phase, double* lanes)) {   \
    add_lanes(x, n, phase, lanes, Term{});                                                             \
  }                                                                                                    \
  BALLOT_CODEC_DISPATCH(void, name, (const float* x, std::size_t n, std::size_t phase, double* lanes), \
                        (x, n, phase, lanes))
BALLOT_CODEC_LANES(add_abs_lanes, AbsTerm)
BALLOT_CODEC_LANES(add_square_lanes, SquareTerm)
BALLOT_CODEC_LANES(add_value_lanes, ValueTerm)
BALLOT_CODEC_LANES(add_non_negative_lanes, NonNegativeTerm)
BALLOT_CODEC_LANES(add_negative_lanes, NegativeTerm)
#undef BALLOT_CODEC_LANES

}  // namespace

// Σ term(x_i) in the order of coding/detail/codec_logic.h: 16 lanes within chunks of kSumChunk
// coordinates, the lanes of a chunk added in order, the chunk sums added pairwise. `lanes_of` is
// one of the add_*_lanes above.
static double chunked_sum(const float* x, std::size_t n,
                          void (*lanes_of)(const float*, std::size_t, std::size_t, double*)) {
  std::vector<double> chunks((n + kSumChunk - 1) / kSumChunk);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    double lanes[kLanes] = {};
    lanes_of(x + c * kSumChunk, std::min(kSumChunk, n - c * kSumChunk), 0, lanes);
    chunks[c] = combine(lanes);
  }
  return pairwise_total(chunks.data(), chunks.size());
}

double sum_abs(const float* x, std::size_t n) { return chunked_sum(x, n, add_abs_lanes); }
double sum_squares(const float* x, std::size_t n) { return chunked_sum(x, n, add_square_lanes); }
double sum_values(const float* x, std::size_t n) { return chunked_sum(x, n, add_value_lanes); }

void ChunkedSum::add(const float* x, std::size_t n) {
  const auto lanes_of = term_ == Term::kAbs           ? add_abs_lanes
                        : term_ == Term::kNonNegative ? add_non_negative_lanes
                                                      : add_negative_lanes;
  while (n > 0) {
    const std::size_t m = std::min(n, kSumChunk - filled_);
    lanes_of(x, m, filled_ % kLanes, lanes_);
    filled_ += m;
    x += m;
    n -= m;
    if (filled_ == kSumChunk) close_chunk();
  }
}

void ChunkedSum::close_chunk() {
  chunks_.push_back(combine(lanes_));
  std::fill(std::begin(lanes_), std::end(lanes_), 0.0);
  filled_ = 0;
}

double ChunkedSum::total() {
  if (filled_ > 0) close_chunk();
  const double sum = pairwise_total(chunks_.data(), chunks_.size());
  chunks_.clear();
  return sum;
}

BALLOT_CODEC_BODY(float, max_abs, (const float* x, std::size_t n)) {
  // On the bit patterns with the sign cleared, integer order is float order for |x| (+0 < ... <
  // +inf), and every NaN pattern lies above +inf: one integer max (vectorised as such) gives
  // max |x_i| and detects NaN.
  constexpr std::uint32_t kInfinity = 0x7F800000u;
  std::uint32_t lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    prefetch(x + i);
    for (int j = 0; j < kLanes; ++j) {
      std::uint32_t bits;
      std::memcpy(&bits, x + i + j, 4);
      bits &= 0x7FFFFFFFu;
      lanes[j] = bits > lanes[j] ? bits : lanes[j];
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    bits &= 0x7FFFFFFFu;
    lanes[j] = bits > lanes[j] ? bits : lanes[j];
  }
  std::uint32_t m = 0;
  for (int j = 0; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
  if (m > kInfinity) return std::numeric_limits<float>::quiet_NaN();
  float out;
  std::memcpy(&out, &m, 4);
  return out;
}
BALLOT_CODEC_DISPATCH(float, max_abs, (const float* x, std::size_t n), (x, n))

namespace {

// One chunk's lanes of moments (max |x|, NaN seen, Σx, Σx²), with the copy-in/copy-out shape of
// add_lanes that GCC vectorises.
struct MomentLanes {
  float max[kLanes] = {};
  std::int32_t nan[kLanes] = {};
};
BALLOT_CODEC_BODY(void, moment_lanes,
                  (const float* y, std::size_t m, MomentLanes* state, double* sum_out, double* squares_out)) {
  float max_lanes[kLanes];
  std::int32_t nan[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    max_lanes[j] = state->max[j];
    nan[j] = state->nan[j];
  }
  double sum[kLanes] = {}, squares[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    prefetch(y + i);
    for (int j = 0; j < kLanes; ++j) {
      const float a = std::fabs(y[i + j]);
      max_lanes[j] = a > max_lanes[j] ? a : max_lanes[j];
      nan[j] |= a != a;
      const double v = y[i + j];
      sum[j] += v;
      squares[j] += v * v;
    }
  }
  for (int j = 0; i < m; ++i, ++j) {
    const float a = std::fabs(y[i]);
    max_lanes[j] = a > max_lanes[j] ? a : max_lanes[j];
    nan[j] |= a != a;
    sum[j] += y[i];
    squares[j] += static_cast<double>(y[i]) * y[i];
  }
  for (int j = 0; j < kLanes; ++j) {
    state->max[j] = max_lanes[j];
    state->nan[j] = nan[j];
  }
  *sum_out = combine(sum);
  *squares_out = combine(squares);
}
BALLOT_CODEC_DISPATCH(void, moment_lanes,
                      (const float* y, std::size_t m, MomentLanes* state, double* sum_out, double* squares_out),
                      (y, m, state, sum_out, squares_out))

}  // namespace

Moments moments(const float* x, std::size_t n) {
  // The lanes of max_abs, sum_values and sum_squares in one loop: the same operations in the same
  // order per lane and chunk, so the results equal the three separate reductions.
  MomentLanes lanes;
  const std::size_t num_chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> sum_chunks(num_chunks), square_chunks(num_chunks);
  for (std::size_t c = 0; c < num_chunks; ++c) {
    moment_lanes(x + c * kSumChunk, std::min(kSumChunk, n - c * kSumChunk), &lanes, &sum_chunks[c], &square_chunks[c]);
  }
  const float* max_lanes = lanes.max;
  const std::int32_t* nan = lanes.nan;
  Moments out;
  bool any_nan = false;
  for (int j = 0; j < kLanes; ++j) {
    out.max_abs = max_lanes[j] > out.max_abs ? max_lanes[j] : out.max_abs;
    any_nan |= nan[j] != 0;
  }
  if (any_nan) out.max_abs = std::numeric_limits<float>::quiet_NaN();
  out.sum = pairwise_total(sum_chunks.data(), num_chunks);
  out.sum_squares = pairwise_total(square_chunks.data(), num_chunks);
  return out;
}

BALLOT_CODEC_BODY(std::size_t, count_negative, (const float* x, std::size_t n)) {
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
BALLOT_CODEC_DISPATCH(std::size_t, count_negative, (const float* x, std::size_t n), (x, n))

BALLOT_CODEC_BODY(void, momentum_accumulate,
                  (const float* g, std::size_t n, float factor, float m, float* u, float* v)) {
  for (std::size_t i = 0; i < n; ++i) {
    const float momentum = m * u[i] + factor * g[i];  // two roundings each: no FMA (file flags)
    u[i] = momentum;
    v[i] = v[i] + momentum;
  }
}
BALLOT_CODEC_DISPATCH(void, momentum_accumulate,
                      (const float* g, std::size_t n, float factor, float m, float* u, float* v),
                      (g, n, factor, m, u, v))

BALLOT_CODEC_BODY(void, add_plane, (const float* bit, std::size_t n, float value, float* level)) {
  for (std::size_t i = 0; i < n; ++i) level[i] += bit[i] > 0 ? value : 0.0f;
}
BALLOT_CODEC_DISPATCH(void, add_plane, (const float* bit, std::size_t n, float value, float* level),
                      (bit, n, value, level))

}  // namespace ballot::coding::detail
