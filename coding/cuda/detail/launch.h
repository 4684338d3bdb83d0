// Internal: the C-linkage launchers of the codec kernels, with plain types only (kernels/cuda/
// launch.h says why: nvcc's implicit headers declare a global `ballot`). Each returns a
// cudaError_t as int (0 = success), checked after every launch; all work is asynchronous on
// `stream`. The host side (codecs_cuda.cc) owns the wire layout; these fill device bytes.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// A segment of the gradient as the kernels see it: coordinates [offset, offset + size), and the
// index of its first kSumChunk-chunk among all segments' chunks.
struct BallotCodecSegment {
  std::uint64_t offset, size, first_chunk;
};

// Per-segment reductions in codec_logic.h's order. `what`: 1 = Σx², 2 = also Σx (moments), 4 = max
// |x| as bits into words (NaN above +inf), 8 = Σ|x| (alone), 16 = the sums of both sides of the
// sign stream (x where x packs as 1, x where x < 0) and the count of entries x < 0 (1-bit SGD). Then, per segment, the
// QSGD (mode 0), TernGrad (mode 1), scaled sign (mode 2, with what = 8) or 1-bit SGD (mode 3, with what = 16) factors:
// QSGD writes the f32 norm at wire_scales + 4k and inverse[k]; TernGrad writes the f32 scale at wire_scales + 4k and
// limit[k], inverse[k], keep_all[k]; scaled sign writes the f32 scale ‖v‖₁/n at wire_scales + 4k;
// 1-bit SGD writes its two f32 means at wire_scales + 8k; DGC's clipping (mode 4, with what = 1, parameter the clip)
// writes the factor min(1, clip/‖x‖₂) into inverse[k] (wire_scales unused). scratch: 3 · (total chunks) doubles;
// words: total chunks words (what = 4 or 16).
int ballot_codec_cuda_factors(int mode, int what, const float* x, const BallotCodecSegment* d_segments,
                              std::size_t num_segments, std::size_t total_chunks, double* scratch, std::uint32_t* words,
                              float parameter, std::uint8_t* wire_scales, float* inverse, float* limit,
                              std::uint8_t* keep_all, void* stream);

// The fused quantising pass of QSGD (mode 0: sign stream then `planes` level planes) or TernGrad
// (mode 1: sign stream then keep mask), every word of every stream written (padding bits zero).
// streams: 4-byte aligned, stream_bytes apart. s: QSGD's level count as float.
int ballot_codec_cuda_quantize(int mode, const float* x, std::size_t d, const BallotCodecSegment* d_segments,
                               std::size_t num_segments, const float* inverse, const float* limit,
                               const std::uint8_t* keep_all, float s, int planes, std::uint64_t seed,
                               std::uint64_t rng_stream, std::uint64_t first_block, std::uint8_t* streams,
                               std::size_t stream_bytes, void* stream);

// QSGD's Elias coding (elias=1), in two calls. The plan: the levels of x[0, d) (the fixed-width
// pass's draws and levels), each coordinate's bit offset in the stream (an exclusive sum of the code
// lengths) in the workspace, and the stream's length in bits into *d_bits (device memory; 0 for
// d = 0). The write: the stream's `words` 64-bit words at `out` (4-byte aligned; little-endian u32
// halves), every bit past the last code zero. workspace: ballot_codec_cuda_elias_workspace(d)
// bytes, 16-byte aligned, untouched between the two calls.
std::size_t ballot_codec_cuda_elias_workspace(std::size_t d);
int ballot_codec_cuda_elias_plan(const float* x, std::size_t d, const BallotCodecSegment* d_segments,
                                 std::size_t num_segments, const float* inverse, float s, std::uint64_t seed,
                                 std::uint64_t rng_stream, std::uint64_t first_block, void* workspace,
                                 std::size_t workspace_bytes, std::uint64_t* d_bits, void* stream);
int ballot_codec_cuda_elias_write(const float* x, std::size_t d, const void* workspace, std::size_t words,
                                  std::uint8_t* out, void* stream);

// Top-k of one segment x[0, n) by magnitude (codec_logic.h's key; ties to the lowest index): the k
// indices, increasing, into d_indices and their values into d_values (both 4-byte aligned).
// workspace: at least ballot_codec_cuda_topk_workspace(n) bytes, 16-byte aligned.
std::size_t ballot_codec_cuda_topk_workspace(std::size_t n);
int ballot_codec_cuda_topk(const float* x, std::size_t n, std::size_t k, void* workspace, std::size_t workspace_bytes,
                           std::uint8_t* d_indices, std::uint8_t* d_values, void* stream);

// The sign stream of x[0, d) (core/bit_vector.h: bit 1 = not negative, so −0, +0 and NaN give 1)
// as stream_bytes / 4 little-endian words, the bits past d zero. out: 4-byte aligned.
int ballot_codec_cuda_signs(const float* x, std::size_t d, std::size_t stream_bytes, std::uint8_t* out, void* stream);

// Threshold (coding/sparse_codecs.h): the indices i of x[0, n) with !(|x_i| < tau) (NaN kept),
// increasing, into d_indices (4-byte aligned), and their count into *d_count (device memory).
// workspace: at least ballot_codec_cuda_threshold_workspace(n) bytes.
std::size_t ballot_codec_cuda_threshold_workspace(std::size_t n);
int ballot_codec_cuda_threshold(const float* x, std::size_t n, float tau, void* workspace, std::size_t workspace_bytes,
                                std::uint8_t* d_indices, std::uint32_t* d_count, void* stream);

// values[j] for j < count: the bits of x[indices[j]] (scaled = 0: threshold), or scale · x[indices[j]]
// rounded to nearest (scaled = 1: random-k), a NaN entry's bits kept and quieted as the host's
// multiplication keeps them. indices and values: 4-byte aligned.
int ballot_codec_cuda_gather(const float* x, const std::uint8_t* indices, std::size_t count, int scaled, float scale,
                             std::uint8_t* values, void* stream);

// Decoders of validated messages (the host checked every byte): accumulator[i] += the decoded
// value, rounded as the CPU decoders round. unit[k]: QSGD's weight·(norm/s), TernGrad's
// weight·scale of segment k. streams as the encoders write them.
int ballot_codec_cuda_dequantize_add(int mode, const std::uint8_t* streams, std::size_t stream_bytes, int planes,
                                     std::size_t d, const BallotCodecSegment* d_segments, std::size_t num_segments,
                                     const float* unit, float* accumulator, void* stream);
// accumulator[i] += unit[k] where bit i of the sign stream is 1, −unit[k] where it is 0 (k the
// segment of i): the sign decoders' (weight · scale) · (±1), exact before the one rounding. With
// `pairs` (1-bit SGD), unit[2k] where the bit is 1 and unit[2k + 1] where it is 0.
int ballot_codec_cuda_sign_add(const std::uint8_t* signs, std::size_t d, const BallotCodecSegment* d_segments,
                               std::size_t num_segments, int pairs, const float* unit, float* accumulator,
                               void* stream);
// DGC's accumulation (detail::momentum_accumulate): u ← m·u + f·g and v ← v + u over [0, d), f the
// segment's factor from `factors` (DGC's clipping; null: 1), each product and sum rounded to nearest.
int ballot_codec_cuda_momentum_accumulate(const float* g, std::size_t d, const BallotCodecSegment* d_segments,
                                          std::size_t num_segments, const float* factors, float m, float* u, float* v,
                                          void* stream);
// a[i] = 0 (and b[i] = 0 when b is not null) for the `count` u32 indices (4-byte aligned): what a
// sparse codec sent leaves its memory.
int ballot_codec_cuda_zero_at(const std::uint8_t* indices, std::size_t count, float* a, float* b, void* stream);
// out[i] = a[i] + b[i], rounded to nearest (error feedback's p = g + e).
int ballot_codec_cuda_add(const float* a, const float* b, std::size_t n, float* out, void* stream);
// x[i] = 0 where x[i] is NaN or ±∞ (a state that one non-finite input would otherwise poison for
// good: error feedback's memory, signum's momentum; as the CPU codecs do).
int ballot_codec_cuda_zero_non_finite(float* x, std::size_t n, void* stream);

// The cast codecs (format 0 fp32, 1 fp16, 2 bf16: coding/cast_codecs.h): out receives x[0, d) as
// 4- or 2-byte values (codec_logic.h's conversions; fp32 keeps every bit), and cast_add adds
// weight · value to accumulator[i], each product and sum rounded to nearest. out and values:
// 4-byte aligned.
int ballot_codec_cuda_cast(int format, const float* x, std::size_t d, std::uint8_t* out, void* stream);
int ballot_codec_cuda_cast_add(int format, const std::uint8_t* values, std::size_t d, float weight, float* accumulator,
                               void* stream);
// unit[k] = weight · (scale_k / divisor) from the f32 scales of a message on the device (QSGD: the
// norms and s; TernGrad, scaled sign and 1-bit SGD: the scales and 1), as the CPU decoders compute
// them.
int ballot_codec_cuda_units(const std::uint8_t* wire_scales, std::size_t count, float divisor, float weight,
                            float* unit, void* stream);
// accumulator[offsets[s] + index] += weight · value for the `count` (index, value) pairs, where
// the pair's segment is found from the running counts (first_pair[s] = index of its first pair).
int ballot_codec_cuda_sparse_add(const std::uint8_t* indices, const std::uint8_t* values, std::size_t count,
                                 const std::uint64_t* first_pair, const std::uint64_t* offsets,
                                 std::size_t num_segments, float weight, float* accumulator, void* stream);
}
