// Helpers shared by the codecs: block-wise sign packing through kernels::pack_signs /
// unpack_signs straight into / out of wire bytes, deterministic multi-lane reductions, and the
// walk over the pieces of a block that fall into each segment.
#pragma once

#include <algorithm>
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
void for_each_piece(std::span<const Segment> segments, std::size_t begin, std::size_t end, std::size_t& cursor,
                    Fn&& fn) {
  while (cursor < segments.size() && segments[cursor].offset + segments[cursor].size <= begin) {
    ++cursor;
  }
  for (std::size_t s = cursor; s < segments.size() && segments[s].offset < end; ++s) {
    const std::size_t lo = std::max(begin, segments[s].offset);
    const std::size_t hi = std::min(end, segments[s].offset + segments[s].size);
    if (lo < hi) fn(s, lo, hi);
  }
}

// Per-coordinate loops, defined in detail/loops.cc: written with independent lanes (no
// reassociation, no FMA contraction) so that the compiler vectorises them for each ISA level
// (kernels::active_isa() picks one per call) and every level computes the same bits; combined in
// a fixed order. sum_abs, sum_squares, sum_values and moments add in the chunked order of
// coding/detail/codec_logic.h, which the CUDA encoders reproduce.
double sum_abs(const float* x, std::size_t n);
double sum_squares(const float* x, std::size_t n);
double sum_values(const float* x, std::size_t n);
// Σ term(x) of one segment in the chunked order, fed in pieces in coordinate order, so that a
// one-pass encoder adds each block while it is in cache. Terms: |x| (the bits of sum_abs over the
// whole segment), x where x packs as bit 1 (x ≥ 0, −0, NaN; else 0), x where x < 0 (else 0).
class ChunkedSum {
 public:
  enum class Term : std::uint8_t { kAbs, kNonNegative, kNegative };
  explicit ChunkedSum(Term term) : term_(term) {}
  void add(const float* x, std::size_t n);  // the segment's next n coordinates
  double total();                           // after the last piece; the object is then empty again

 private:
  void close_chunk();
  Term term_;
  double lanes_[16] = {};
  std::size_t filled_ = 0;  // coordinates of the current chunk added so far
  std::vector<double> chunks_;
};
// max |x_i|; NaN propagates (a NaN input makes the scale NaN, so the message carries it).
float max_abs(const float* x, std::size_t n);
// max |x_i| (NaN propagates, as max_abs), Σx and Σx² in one pass (TernGrad with clipping).
struct Moments {
  float max_abs = 0;
  double sum = 0, sum_squares = 0;
};
Moments moments(const float* x, std::size_t n);
// DGC's momentum correction (Lin et al. 2018, eq. 5): u_i <- m·u_i + factor·g_i; v_i <- v_i + u_i.
void momentum_accumulate(const float* g, std::size_t n, float factor, float m, float* u, float* v);
// The number of entries x_i < 0 (−0 and NaN are not: they pack as bit 1, core/bit_vector.h).
std::size_t count_negative(const float* x, std::size_t n);
// out_i += (bit_i > 0 ? value : 0): rebuilding levels from unpacked bit-planes.
void add_plane(const float* bit, std::size_t n, float value, float* level);

}  // namespace ballot::coding::detail
