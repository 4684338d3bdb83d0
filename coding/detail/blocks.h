// Helpers shared by the codecs: block-wise sign packing through kernels::pack_signs /
// unpack_signs straight into / out of wire bytes, deterministic multi-lane reductions, and the
// walk over the pieces of a block that fall into each segment.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "coding/wire_format.h"
#include "core/bit_vector.h"
#include "core/result.h"
#include "kernels/sign_kernels.h"

namespace ballot::coding::detail {

// Coordinates per block: a multiple of 64 (blocks own whole sign words), and 32 KiB of floats so
// that a block read once from memory stays in L1/L2 for the second look.
inline constexpr std::size_t kBlock = 8192;
static_assert(kBlock % 64 == 0);

inline std::size_t sign_bytes(std::size_t d) { return 8 * BitVector::words_for(d); }

// Packs `values` (a block starting at a multiple of 64) into its words at `dst` (unaligned).
inline void pack_block(std::span<const float> values, BitVector& scratch, std::uint8_t* dst) {
  kernels::pack_signs(values, scratch);
  std::memcpy(dst, scratch.data(), scratch.num_words() * 8);
}

// Unpacks out.size() signs from the words at `src` into ±1. The caller has validated the padding
// of the last word of the stream (check_padding).
inline void unpack_block(const std::uint8_t* src, BitVector& scratch, std::span<float> out) {
  if (scratch.size() != out.size()) scratch = BitVector(out.size());
  std::memcpy(scratch.data(), src, scratch.num_words() * 8);
  kernels::unpack_signs(scratch, out, 1.0f);
}

// The padding bits of a packed stream of d bits must be zero (core/bit_vector.h).
inline Status check_padding(const std::uint8_t* words, std::size_t d, const char* what) {
  if (d % 64 == 0) return {};
  const auto last = load_pod<std::uint64_t>(words + 8 * (BitVector::words_for(d) - 1));
  if ((last >> (d % 64)) != 0) {
    return malformed(std::string("non-zero padding bits in ") + what);
  }
  return {};
}

// Calls fn(segment_index, begin, end) for each non-empty intersection of [begin, end) with the
// segments (sorted, contiguous). `cursor` carries the segment position between calls.
template <typename Fn>
void for_each_piece(std::span<const Segment> segments, std::size_t begin, std::size_t end,
                    std::size_t& cursor, Fn&& fn) {
  while (cursor < segments.size() && segments[cursor].offset + segments[cursor].size <= begin) {
    ++cursor;
  }
  for (std::size_t s = cursor; s < segments.size() && segments[s].offset < end; ++s) {
    const std::size_t lo = std::max(begin, segments[s].offset);
    const std::size_t hi = std::min(end, segments[s].offset + segments[s].size);
    if (lo < hi) fn(s, lo, hi);
  }
}

// Reductions with 16 independent lanes, combined in a fixed order: the compiler vectorises them
// without reassociating, so the result is the same on every ISA (and deterministic).
inline double sum_abs(const float* x, std::size_t n) {
  double lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) lanes[j] += std::fabs(static_cast<double>(x[i + j]));
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += std::fabs(static_cast<double>(x[i]));
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

inline double sum_squares(const float* x, std::size_t n) {
  double lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) {
      const double v = x[i + j];
      lanes[j] += v * v;
    }
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += static_cast<double>(x[i]) * x[i];
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

inline double sum_values(const float* x, std::size_t n) {
  double lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += x[i];
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

// max |x_i|; NaN propagates (a NaN input makes the scale NaN, so the message carries it).
inline float max_abs(const float* x, std::size_t n) {
  float lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) {
      const float a = std::fabs(x[i + j]);
      lanes[j] = (a > lanes[j] || a != a) ? a : lanes[j];
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const float a = std::fabs(x[i]);
    lanes[j] = (a > lanes[j] || a != a) ? a : lanes[j];
  }
  float m = 0;
  for (float lane : lanes) m = (lane > m || lane != lane) ? lane : m;
  return m;
}

}  // namespace ballot::coding::detail
