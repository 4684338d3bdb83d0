// Internal: the inner loops of the robust rules, compiled once per instruction-set level
// (generic x86-64, AVX2+FMA, AVX-512) and chosen at run time by kernels::active_isa(), so that
// set_isa_limit() caps them like the sign kernels. Not part of the public API; no Eigen types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ballot::robust::detail {

// A compare-exchange of a sorting/selection network: wire `lo` receives the minimum.
struct Comparator {
  std::uint32_t lo;
  std::uint32_t hi;
};

// Columns per tile of the coordinate-wise rules: one tile of every row stays in L1.
inline constexpr std::size_t kTile = 64;

// squared_norm sums its input in blocks of kNormBlock floats (float lanes within a block, each
// block's total added in order into a double), so squared_norm of a vector equals the in-order
// double sum, starting from 0, of squared_norm over its consecutive kNormBlock-float pieces: a
// norm split across threads at multiples of kNormBlock gives the same bits.
inline constexpr std::size_t kNormBlock = 1024;

// A stage's output of at least this many bytes is written with streaming stores (scale_copy_stream):
// it would not stay in the caches, and is then not read in before it is written. A smaller one is
// written through the caches, where the next stage finds it. Measured (robust_bench, ARC, cached
// against streamed): n = 10, d = 10⁵ (4 MB) 0.14 against 0.21 ms; n = 25, d = 10⁵ (10 MB) 0.84
// against 0.51; n = 100, d = 10⁶ 53 against 39.5.
inline constexpr std::size_t kStreamOutputBytes = std::size_t{8} << 20;

struct IsaKernels {
  const char* name;
  // Copies len floats and returns whether all of them are finite (no NaN, no ±Inf).
  bool (*copy_finite)(const float* src, float* dst, std::size_t len);
  bool (*all_finite)(const float* x, std::size_t len);
  // Copies len floats into kTile-float chunks: chunk t goes to dst + t·tile_stride. Returns
  // whether all are finite. (Tiles of all rows then sit contiguously, free of cache-set conflicts.)
  // Meanwhile prefetches ahead[0, ahead_len) (ahead_len may be 0): the next block of the same row.
  bool (*copy_finite_tiled)(const float* src, std::size_t len, float* dst, std::size_t tile_stride, const float* ahead,
                            std::size_t ahead_len);
  // out[j] = (float)(((((0.0 + x_0[j]) + x_1[j]) + …) + x_{count−1}[j]) · (1/count)), the sums in
  // double, x_r = rows[r] or, when weights is not null, x_r[j] = (float)(weights[r] · rows[r][j]) (a
  // float product: what a stage writing the weighted rows would store), for j < len and count ≥ 1,
  // and whether all x are finite; acc holds len doubles of scratch. Prefetches rows[r][len, len +
  // ahead) on the way (each row's next block, as copy_finite_tiled does).
  bool (*mean_rows)(const float* const* rows, const float* weights, std::size_t count, std::size_t len, double* acc,
                    float* out, std::size_t ahead);
  // Σ x² in double (finite inputs give a finite result unless it overflows double), summed in
  // blocks of kNormBlock floats.
  double (*squared_norm)(const float* x, std::size_t len);
  // Σ (x − y)² in double, in the same blocks and lanes (each difference rounded to float first).
  double (*squared_distance)(const float* x, const float* y, std::size_t len);
  // Σ x·y in double.
  double (*dot)(const float* x, const float* y, std::size_t len);
  // out[j] = a · x[j].
  void (*scale_copy)(float a, const float* x, float* out, std::size_t len);
  // The same values, written with streaming stores (past the caches) where the level has them.
  void (*scale_copy_stream)(float a, const float* x, float* out, std::size_t len);
  // out[j] = ((a·x_0[j] + a·x_1[j]) + …) + a·x_{count−1}[j] in float (count ≥ 1, x_k = rows[k]):
  // the values of scale_copy then count − 1 axpy, in one pass, written with streaming stores when
  // `stream`. Returns whether every out[j] is finite.
  bool (*scaled_sum_rows)(const float* const* rows, std::size_t count, float a, std::size_t len, float* out,
                          bool stream);
  // acc[j] += a · x[j].
  void (*axpy)(float a, const float* x, float* acc, std::size_t len);
  // The same (bit for bit), prefetching ahead[0, ahead_len) into L2 on the way: the caller's next
  // block of x, which starts a new page where the hardware prefetcher would start cold.
  void (*axpy_ahead)(float a, const float* x, float* acc, std::size_t len, const float* ahead, std::size_t ahead_len);
  // g (n×n, column-major) = A·Aᵀ where A is n×k, row-major with row stride `stride` floats.
  // Only the lower triangle is guaranteed; the caller mirrors it.
  void (*gram)(const float* a, std::size_t n, std::size_t k, std::size_t stride, float* g);
  // out (m×k, row stride out_stride) = C (m×n, row-major) · A (n×k, row stride stride).
  void (*mix)(const float* c, std::size_t m, const float* a, std::size_t n, std::size_t k, std::size_t stride,
              float* out, std::size_t out_stride);
  // Applies the comparators to a tile: wire w is tile[w·stride + j] for j < width (width ≤ kTile).
  void (*network)(float* tile, std::size_t stride, std::size_t width, const Comparator* comparators, std::size_t count);
  // Sorts wires [0, wires) in aligned groups of 16 with Batcher's 16-wire network (the comparators
  // of selection_network's first four rounds, in their order), in registers; a last, partial group
  // is padded with +∞ (finite inputs: the padding stays above every value and is not stored).
  void (*sort_groups16)(float* tile, std::size_t stride, std::size_t width, std::size_t wires);
  // The copy and the sort of one group fused: src[0..rows) (rows ≤ 16) are rows at the block's
  // first column; their `width` columns (a multiple of kTile) are sorted column-wise into `rows`
  // consecutive wires of the tiled block (tile t at block + t·tile_floats, wire w at + w·kTile):
  // the values that copy_finite_tiled + sort_groups16 leave there. Returns whether all inputs
  // were finite. Prefetches src[r][width, width + ahead) (the rows' next block) on the way.
  bool (*gather_sort_groups16)(const float* const* src, std::size_t rows, std::size_t width, float* block,
                               std::size_t tile_floats, std::size_t ahead);
  // out[j] = mean of rows [lo, hi) of the tile, summed in row order (double accumulator).
  void (*rows_mean)(const float* tile, std::size_t stride, std::size_t width, std::size_t lo, std::size_t hi,
                    float* out);
  // The tile's rows [first, last + w) and the middle ranks (m − 1)/2, m/2 hold the sorted values
  // of those ranks per column. out[j] = mean of the w values closest to the column's median (ties in
  // distance: the lower value), w consecutive ranks starting at the first s in [first, last) with
  // median − x[s] <= x[s + w] − median (else at last), summed in double, rank r into accumulator
  // (r − first) mod 4, the four combined as (s0 + s1) + (s2 + s3). Full tiles need
  // last ≤ first + w (true of window_ranks).
  void (*closest_window_mean)(const float* tile, std::size_t stride, std::size_t width, std::size_t m, std::size_t w,
                              std::size_t first, std::size_t last, float* out);
};

// The scale-copy kernel for a stage output of out_bytes: streaming at kStreamOutputBytes and above.
inline auto scale_copy_for(const IsaKernels& kern, std::size_t out_bytes) {
  return out_bytes >= kStreamOutputBytes ? kern.scale_copy_stream : kern.scale_copy;
}

// The kernels of kernels::active_isa().
const IsaKernels& isa_kernels();

}  // namespace ballot::robust::detail
