// Host side of the codec kernels (compiled by the host compiler; see launch.h).
#include "coding/cuda/codecs_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "coding/cast_codecs.h"
#include "coding/cuda/detail/launch.h"
#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/detail/quantized_wire.h"
#include "coding/detail/rounding.h"
#include "coding/detail/sparse.h"
#include "coding/dgc.h"
#include "coding/error_feedback.h"
#include "coding/global_topk.h"
#include "coding/quantizers.h"
#include "coding/sign_codecs.h"
#include "coding/sparse_codecs.h"
#include "coding/wire_format.h"
#include "kernels/cuda/cuda_kernels.h"

namespace ballot::coding::cuda {
namespace {

using kernels::cuda::cuda_status;
using kernels::cuda::require_device;

// Workspace slots.
enum Slot : int {
  kSegments,
  kScratch,
  kWords,
  kFactors,
  kTopK,
  kMessage,
  kSparseTables,
  kHostIo,
  kUnits,
  kOut,
  kIndices,
  kCandidates,
  kThresholdTemp,
  kSample,
  kSelected,
  kElias,
  kNumSlots
};

std::vector<BallotCodecSegment> segment_table(std::span<const Segment> segments, std::size_t& total_chunks) {
  std::vector<BallotCodecSegment> table;
  table.reserve(segments.size());
  total_chunks = 0;
  for (const Segment& segment : segments) {
    table.push_back({segment.offset, segment.size, total_chunks});
    total_chunks += (segment.size + detail::kSumChunk - 1) / detail::kSumChunk;
  }
  return table;
}

Status upload(void* d_destination, const void* host, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  return cuda_status(
      cudaMemcpyAsync(d_destination, host, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)), "upload");
}

// Copies device bytes to the host and waits for them.
Status download(void* host, const void* d_source, std::size_t bytes, void* stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (bytes > 0) {
    BALLOT_TRY(cuda_status(cudaMemcpyAsync(host, d_source, bytes, cudaMemcpyDeviceToHost, cuda_stream), "download"));
  }
  return cuda_status(cudaStreamSynchronize(cuda_stream), "download");
}

Status copy_on_device(void* d_destination, const void* d_source, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  return cuda_status(
      cudaMemcpyAsync(d_destination, d_source, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      "device copy");
}

// A device buffer of `floats` floats, zeroed; null for none.
Result<float*> zeroed_floats(std::size_t floats, void* stream) {
  if (floats == 0) return static_cast<float*>(nullptr);
  void* memory = nullptr;
  BALLOT_TRY(cuda_status(cudaMalloc(&memory, 4 * floats), "cudaMalloc"));
  const Status zeroed =
      cuda_status(cudaMemsetAsync(memory, 0, 4 * floats, static_cast<cudaStream_t>(stream)), "memset");
  if (!zeroed.ok()) {
    cudaFree(memory);
    return zeroed.error();
  }
  return static_cast<float*>(memory);
}

// A device twin's state of `size` coordinates (`per_coordinate` floats each in `buffer`) made
// ready for d: kept when d is its size, else freed and restarted at zero. `size` is set only once
// the new state is zero, so a failure leaves no state to encode from.
Status fit_zeroed(float*& buffer, std::size_t& size, std::size_t d, std::size_t per_coordinate, void* stream) {
  if (d == size && (d == 0 || buffer != nullptr)) return {};
  if (buffer != nullptr) cudaFree(buffer);
  buffer = nullptr;
  size = 0;
  BALLOT_ASSIGN_OR_RETURN(buffer, zeroed_floats(per_coordinate * d, stream));
  size = d;
  return {};
}

// `codec` as the CPU codec a device twin mirrors, or kInvalidArgument naming the one it needs.
template <class Cpu>
Result<const Cpu*> twin_of(const Codec& codec, const char* needs) {
  const auto* cpu = dynamic_cast<const Cpu*>(&codec);
  if (cpu == nullptr) return make_error(ErrorCode::kInvalidArgument, std::string(needs) + "; got " + codec.spec());
  return cpu;
}

// The cast codecs' format as the kernels number them, which is FloatFormat's (0 fp32, 1 fp16, 2 bf16).
static_assert(static_cast<int>(FloatFormat::kFp16) == 1 && static_cast<int>(FloatFormat::kBf16) == 2);
int cast_format(const CastCodec& codec) { return static_cast<int>(codec.format()); }

// The cast codecs: the header from the host, the values from the device.
Status encode_cast(const CastCodec& codec, const float* d_gradient, const GradientLayout& layout,
                   std::size_t wire_bytes, std::uint8_t* d_out, void* stream) {
  std::vector<std::uint8_t> prefix;
  write_header(prefix, codec.id(), Granularity::kModel, 0, layout, wire_bytes - kHeaderBytes);
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  return cuda_status(
      ballot_codec_cuda_cast(cast_format(codec), d_gradient, layout.total_size(), d_out + prefix.size(), stream),
      "cast kernel");
}

// The quantisers (mode 0: QSGD, 1: TernGrad): header and fixed fields from the host, scales and
// streams from the device.
Status encode_quantized(int mode, Granularity granularity, float parameter, std::uint32_t levels, CodecId id,
                        std::size_t wire_bytes, const float* d_gradient, const GradientLayout& layout, Rng& rng,
                        std::uint8_t* d_out, Workspace& workspace, void* stream) {
  const std::size_t d = layout.total_size();
  const auto segments = segments_of(layout, granularity);
  const std::size_t S = segments.size();
  std::vector<std::uint8_t> prefix;
  write_header(prefix, id, granularity, 0, layout, wire_bytes - kHeaderBytes);
  if (mode == 0) append_pod<std::uint32_t>(prefix, levels);
  const std::size_t scales_at = prefix.size();
  const std::size_t streams_at = scales_at + 4 * S;
  const std::size_t stream_bytes = detail::sign_bytes(d);
  const int planes = mode == 0 ? std::bit_width(levels) : 1;
  if (streams_at + stream_bytes * static_cast<std::size_t>(1 + planes) != wire_bytes) {
    return make_error(ErrorCode::kInternal, "device encoder: the wire layout disagrees with the codec's size");
  }
  const detail::RoundingStream random(rng, d);
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  if (S == 0) return {};
  std::size_t total_chunks = 0;
  const auto table = segment_table(segments, total_chunks);
  BALLOT_ASSIGN_OR_RETURN(void* d_segments, workspace.get(kSegments, sizeof(BallotCodecSegment) * S));
  BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace.get(kScratch, 8 * 3 * std::max<std::size_t>(total_chunks, 1)));
  BALLOT_ASSIGN_OR_RETURN(void* max_bits, workspace.get(kWords, 4 * std::max<std::size_t>(total_chunks, 1)));
  BALLOT_ASSIGN_OR_RETURN(void* factors, workspace.get(kFactors, 9 * S));
  BALLOT_TRY(upload(d_segments, table.data(), sizeof(BallotCodecSegment) * S, stream));
  auto* inverse = static_cast<float*>(factors);
  float* limit = inverse + S;
  auto* keep_all = reinterpret_cast<std::uint8_t*>(limit + S);
  const int what = mode == 0 ? 1 : (parameter > 0 ? 7 : 4);
  const auto* segments_on_device = static_cast<const BallotCodecSegment*>(d_segments);
  BALLOT_TRY(cuda_status(ballot_codec_cuda_factors(mode, what, d_gradient, segments_on_device, S, total_chunks,
                                                   static_cast<double*>(scratch), static_cast<std::uint32_t*>(max_bits),
                                                   parameter, d_out + scales_at, inverse, limit, keep_all, stream),
                         "codec factors kernel"));
  return cuda_status(ballot_codec_cuda_quantize(mode, d_gradient, d, segments_on_device, S, inverse, limit, keep_all,
                                                static_cast<float>(levels), planes, random.seed, random.stream,
                                                random.first_block, d_out + streams_at, stream_bytes, stream),
                     "codec quantize kernel");
}

// Top-k (and global top-k's local selection, under its id): header and counts from the host, the
// indices and values of each segment from the device top-k.
// QSGD with Elias coding: the header, s and the norms' places from the host, the norms from the
// device; then the levels and the code offsets on the device, the stream's length to the host (one
// synchronisation: the message's size depends on it), and the stream's words written on the
// device. Returns the message's size.
Result<std::size_t> encode_qsgd_elias(const QsgdCodec& codec, const float* d_gradient, const GradientLayout& layout,
                                      Rng& rng, std::uint8_t* d_out, Workspace& workspace, void* stream) {
  const std::size_t d = layout.total_size();
  const auto& options = codec.options();
  const auto segments = segments_of(layout, options.granularity);
  const std::size_t S = segments.size();
  std::vector<std::uint8_t> prefix;
  write_header(prefix, CodecId::kQsgd, options.granularity, QsgdCodec::kEliasFlag, layout, 0);
  append_pod<std::uint32_t>(prefix, options.s);
  const std::size_t scales_at = prefix.size();
  const std::size_t bits_at = scales_at + 4 * S;
  const detail::RoundingStream random(rng, d);
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  std::uint64_t bits = 0;
  void* plan = nullptr;
  if (S > 0) {
    std::size_t total_chunks = 0;
    const auto table = segment_table(segments, total_chunks);
    BALLOT_ASSIGN_OR_RETURN(void* d_segments, workspace.get(kSegments, sizeof(BallotCodecSegment) * S));
    BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace.get(kScratch, 8 * 3 * std::max<std::size_t>(total_chunks, 1)));
    BALLOT_ASSIGN_OR_RETURN(void* factors, workspace.get(kFactors, 8 + 4 * S));
    BALLOT_TRY(upload(d_segments, table.data(), sizeof(BallotCodecSegment) * S, stream));
    auto* d_bits = static_cast<std::uint64_t*>(factors);
    auto* inverse = reinterpret_cast<float*>(d_bits + 1);
    const auto* segments_on_device = static_cast<const BallotCodecSegment*>(d_segments);
    const auto s = static_cast<float>(options.s);
    BALLOT_TRY(cuda_status(
        ballot_codec_cuda_factors(0, 1, d_gradient, segments_on_device, S, total_chunks, static_cast<double*>(scratch),
                                  nullptr, s, d_out + scales_at, inverse, nullptr, nullptr, stream),
        "codec factors kernel"));
    const std::size_t plan_bytes = ballot_codec_cuda_elias_workspace(d);
    BALLOT_ASSIGN_OR_RETURN(plan, workspace.get(kElias, plan_bytes));
    BALLOT_TRY(
        cuda_status(ballot_codec_cuda_elias_plan(d_gradient, d, segments_on_device, S, inverse, s, random.seed,
                                                 random.stream, random.first_block, plan, plan_bytes, d_bits, stream),
                    "elias plan kernels"));
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    BALLOT_TRY(cuda_status(cudaMemcpyAsync(&bits, d_bits, 8, cudaMemcpyDeviceToHost, cuda_stream), "download"));
    BALLOT_TRY(cuda_status(cudaStreamSynchronize(cuda_stream), "elias length"));
  }
  const std::size_t words = static_cast<std::size_t>((bits + 63) / 64);
  if (bits_at + 8 + 8 * words > codec.wire_size(layout)) {
    return make_error(ErrorCode::kInternal, "device encoder: the Elias stream is longer than the codec's bound");
  }
  BALLOT_TRY(upload(d_out + bits_at, &bits, 8, stream));
  BALLOT_TRY(cuda_status(ballot_codec_cuda_elias_write(d_gradient, d, plan, words, d_out + bits_at + 8, stream),
                         "elias write kernel"));
  return bits_at + 8 + 8 * words;
}

Status encode_top_k(const SparseOptions& options, CodecId id, std::size_t wire_bytes, const float* d_gradient,
                    const GradientLayout& layout, std::uint8_t* d_out, Workspace& workspace, void* stream) {
  const auto segments = segments_of(layout, options.granularity);
  const auto budgets = detail::sparse_budgets(segments, options.k, options.ratio);
  std::size_t total = 0, largest = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    total += budgets[s];
    if (budgets[s] > 0) largest = std::max(largest, segments[s].size);
  }
  std::vector<std::uint8_t> prefix;
  write_header(prefix, id, options.granularity, 0, layout, wire_bytes - kHeaderBytes);
  for (const std::size_t count : budgets) append_pod<std::uint32_t>(prefix, static_cast<std::uint32_t>(count));
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  if (total == 0) return {};
  const std::size_t bytes = ballot_codec_cuda_topk_workspace(largest);
  BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace.get(kTopK, bytes));
  std::uint8_t* indices = d_out + prefix.size();
  std::uint8_t* values = indices + 4 * total;
  std::size_t done = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    if (budgets[s] == 0) continue;
    BALLOT_TRY(cuda_status(ballot_codec_cuda_topk(d_gradient + segments[s].offset, segments[s].size, budgets[s],
                                                  scratch, bytes, indices + 4 * done, values + 4 * done, stream),
                           "top-k kernels"));
    done += budgets[s];
  }
  return {};
}

// sign, scaled_sign and onebit: header and scale places from the host; the scales (‖v‖₁/n, or
// 1-bit SGD's two means, per segment: a reduction pass) and the sign stream from the device.
Status encode_sign(const SignCodec& codec, const float* d_gradient, const GradientLayout& layout, std::uint8_t* d_out,
                   Workspace& workspace, void* stream) {
  const bool plain = codec.kind() == SignKind::kSign;
  const bool onebit = codec.kind() == SignKind::kOneBit;
  // Plain sign carries no scale: always "model" on the wire, as SignCodec::encode writes it.
  const Granularity granularity = plain ? Granularity::kModel : codec.granularity();
  const auto segments = segments_of(layout, granularity);
  const std::size_t S = segments.size();
  const std::size_t num_scales = plain ? 0 : (onebit ? 2 : 1) * S;
  const std::size_t d = layout.total_size();
  std::vector<std::uint8_t> prefix;
  write_header(prefix, codec.id(), granularity, 0, layout, 4 * num_scales + detail::sign_bytes(d));
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  if (!plain && S > 0) {
    std::size_t total_chunks = 0;
    const auto table = segment_table(segments, total_chunks);
    BALLOT_ASSIGN_OR_RETURN(void* d_segments, workspace.get(kSegments, sizeof(BallotCodecSegment) * S));
    BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace.get(kScratch, 8 * 3 * std::max<std::size_t>(total_chunks, 1)));
    void* words = nullptr;  // onebit's count of negative entries per chunk
    if (onebit) {
      BALLOT_ASSIGN_OR_RETURN(words, workspace.get(kWords, 4 * std::max<std::size_t>(total_chunks, 1)));
    }
    BALLOT_ASSIGN_OR_RETURN(void* factors, workspace.get(kFactors, 9 * S));
    BALLOT_TRY(upload(d_segments, table.data(), sizeof(BallotCodecSegment) * S, stream));
    auto* unused = static_cast<float*>(factors);
    BALLOT_TRY(cuda_status(
        ballot_codec_cuda_factors(
            onebit ? 3 : 2, onebit ? 16 : 8, d_gradient, static_cast<const BallotCodecSegment*>(d_segments), S,
            total_chunks, static_cast<double*>(scratch), static_cast<std::uint32_t*>(words), 0.0f, d_out + kHeaderBytes,
            unused, unused + S, reinterpret_cast<std::uint8_t*>(unused + 2 * S), stream),
        "sign factors kernel"));
  }
  return cuda_status(
      ballot_codec_cuda_signs(d_gradient, d, detail::sign_bytes(d), d_out + kHeaderBytes + 4 * num_scales, stream),
      "sign kernel");
}

// Random-k: the index stream is drawn on the host (Floyd's algorithm, as the CPU encoder, moving
// the Rng the same way), uploaded, and the scaled values gathered on the device.
Status encode_random_k(const RandomKCodec& codec, const float* d_gradient, const GradientLayout& layout, Rng& rng,
                       std::uint8_t* d_out, Workspace& workspace, void* stream) {
  const auto& options = codec.options();
  const auto segments = segments_of(layout, options.granularity);
  const auto budgets = detail::sparse_budgets(segments, options.k, options.ratio);
  std::size_t total = 0;
  for (const std::size_t count : budgets) total += count;
  std::vector<std::uint8_t> prefix;
  write_header(prefix, CodecId::kRandomK, options.granularity, 0, layout, codec.wire_size(layout) - kHeaderBytes);
  for (const std::size_t count : budgets) append_pod<std::uint32_t>(prefix, static_cast<std::uint32_t>(count));
  append_pod<std::uint64_t>(prefix, rng.seed());
  append_pod<std::uint64_t>(prefix, rng.stream());
  append_pod<std::uint64_t>(prefix, rng.position());
  std::vector<std::uint32_t> indices;
  indices.reserve(total);
  for (std::size_t s = 0; s < segments.size(); ++s) random_subset(rng, segments[s].size, budgets[s], indices);
  // random_subset appends: segment s's indices follow segment s − 1's.
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  if (total == 0) return {};
  BALLOT_ASSIGN_OR_RETURN(void* d_indices, workspace.get(kIndices, 4 * total));
  BALLOT_TRY(upload(d_indices, indices.data(), 4 * total, stream));
  std::uint8_t* values = d_out + prefix.size();
  std::size_t done = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    if (budgets[s] == 0) continue;
    // Unbiased: each coordinate is kept with probability k/n, so scale by n/k (as the CPU).
    const float scale = static_cast<float>(static_cast<double>(segments[s].size) / static_cast<double>(budgets[s]));
    BALLOT_TRY(cuda_status(ballot_codec_cuda_gather(d_gradient + segments[s].offset,
                                                    static_cast<const std::uint8_t*>(d_indices) + 4 * done, budgets[s],
                                                    1, scale, values + 4 * done, stream),
                           "random-k gather kernel"));
    done += budgets[s];
  }
  return {};
}

// Threshold: the selection on the device; its count comes back to the host (one synchronisation)
// for the header and the values' place.
Result<std::size_t> encode_threshold(const ThresholdCodec& codec, const float* d_gradient, const GradientLayout& layout,
                                     std::uint8_t* d_out, Workspace& workspace, void* stream) {
  const std::size_t d = layout.total_size();
  if (d > std::size_t{UINT32_MAX}) {
    return make_error(ErrorCode::kInvalidArgument, "threshold: segments must have fewer than 2^32 coordinates");
  }
  constexpr std::size_t kIndicesAt = kHeaderBytes + 4;
  std::uint32_t count = 0;
  if (d > 0) {
    const std::size_t temp = ballot_codec_cuda_threshold_workspace(d);
    BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace.get(kTopK, temp + 256));
    auto* d_count = static_cast<std::uint32_t*>(scratch);
    BALLOT_TRY(cuda_status(
        ballot_codec_cuda_threshold(d_gradient, d, codec.options().tau, static_cast<std::uint8_t*>(scratch) + 256, temp,
                                    d_out + kIndicesAt, d_count, stream),
        "threshold select"));
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    BALLOT_TRY(cuda_status(cudaMemcpyAsync(&count, d_count, 4, cudaMemcpyDeviceToHost, cuda_stream), "download"));
    BALLOT_TRY(cuda_status(cudaStreamSynchronize(cuda_stream), "threshold count"));
    BALLOT_TRY(cuda_status(ballot_codec_cuda_gather(d_gradient, d_out + kIndicesAt, count, 0, 1.0f,
                                                    d_out + kIndicesAt + 4 * std::size_t{count}, stream),
                           "threshold gather kernel"));
  }
  std::vector<std::uint8_t> prefix;
  write_header(prefix, CodecId::kThreshold, Granularity::kModel, 0, layout, 4 + 8 * std::size_t{count});
  append_pod<std::uint32_t>(prefix, count);
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  return kIndicesAt + 8 * std::size_t{count};
}

// The per-pair tables of the sparse decoder: the index of each segment's first pair, then each
// segment's offset (2·S words).
std::vector<std::uint64_t> sparse_tables(std::span<const Segment> segments, std::span<const std::size_t> counts,
                                         std::uint64_t& total) {
  const std::size_t S = segments.size();
  std::vector<std::uint64_t> tables(2 * S);
  total = 0;
  for (std::size_t s = 0; s < S; ++s) {
    tables[s] = total;
    tables[S + s] = segments[s].offset;
    total += counts[s];
  }
  return tables;
}

Status sparse_add(const std::uint8_t* d_indices, const std::uint8_t* d_values, std::uint64_t total,
                  const std::uint64_t* d_tables, std::size_t S, float weight, float* d_accumulator, void* stream) {
  return cuda_status(ballot_codec_cuda_sparse_add(d_indices, d_values, static_cast<std::size_t>(total), d_tables,
                                                  d_tables + S, S, weight, d_accumulator, stream),
                     "sparse decode kernel");
}

// random-k's indices of every segment, in the message's order, drawn from `rng` as the CPU does.
std::vector<std::uint32_t> random_k_indices(Rng rng, std::span<const Segment> segments,
                                            std::span<const std::size_t> counts) {
  std::vector<std::uint32_t> indices;
  for (std::size_t s = 0; s < segments.size(); ++s) random_subset(rng, segments[s].size, counts[s], indices);
  return indices;
}

// decode_add of a message the device itself just encoded (error feedback's own Δ, `bytes` long):
// already in device memory and trusted, so nothing is validated; the offsets come from the codec
// and layout, random-k's indices from the Rng the encoder drew them from.
Status decode_own(const Codec& codec, const std::uint8_t* d_message, std::size_t bytes, const GradientLayout& layout,
                  const Rng& drawn_from, float* d_accumulator, float weight, Workspace& workspace, void* stream) {
  const std::size_t d = layout.total_size();
  if (d == 0) return {};
  if (const auto* qsgd = dynamic_cast<const QsgdCodec*>(&codec); qsgd != nullptr && qsgd->options().elias) {
    // The Elias stream is decoded through planes transcoded on the host: the message (a few bits a
    // coordinate) goes down, its planes come back up.
    std::vector<std::uint8_t> message(bytes);
    BALLOT_TRY(download(message.data(), d_message, bytes, stream));
    return decode_add(codec, message, layout, d_accumulator, weight, workspace, stream);
  }
  if (const auto* cast = dynamic_cast<const CastCodec*>(&codec)) {
    return cuda_status(
        ballot_codec_cuda_cast_add(cast_format(*cast), d_message + kHeaderBytes, d, weight, d_accumulator, stream),
        "cast decode kernel");
  }
  const auto* top_k = dynamic_cast<const TopKCodec*>(&codec);
  const auto* random_k = dynamic_cast<const RandomKCodec*>(&codec);
  if (top_k != nullptr || random_k != nullptr || dynamic_cast<const ThresholdCodec*>(&codec) != nullptr) {
    const SparseOptions* options = top_k != nullptr      ? &top_k->options()
                                   : random_k != nullptr ? &random_k->options()
                                                         : nullptr;
    const auto segments = segments_of(layout, options != nullptr ? options->granularity : Granularity::kModel);
    const std::size_t S = segments.size();
    const std::size_t counts_at = kHeaderBytes, pairs_at = counts_at + 4 * S;
    std::vector<std::size_t> counts;
    if (options != nullptr) {
      counts = detail::sparse_budgets(segments, options->k, options->ratio);
    } else {
      counts = {(bytes - pairs_at) / 8};  // threshold: 8 bytes a pair
    }
    std::uint64_t total = 0;
    const auto tables = sparse_tables(segments, counts, total);
    BALLOT_ASSIGN_OR_RETURN(void* d_tables, workspace.get(kSparseTables, 16 * S));
    BALLOT_TRY(upload(d_tables, tables.data(), 16 * S, stream));
    const auto* table = static_cast<const std::uint64_t*>(d_tables);
    if (random_k == nullptr) {
      const std::uint8_t* indices = d_message + pairs_at;
      return sparse_add(indices, indices + 4 * total, total, table, S, weight, d_accumulator, stream);
    }
    const auto indices = random_k_indices(drawn_from, segments, counts);
    BALLOT_ASSIGN_OR_RETURN(void* d_indices, workspace.get(kIndices, 4 * std::max<std::uint64_t>(total, 1)));
    BALLOT_TRY(upload(d_indices, indices.data(), 4 * total, stream));
    return sparse_add(static_cast<const std::uint8_t*>(d_indices), d_message + pairs_at + 24, total, table, S, weight,
                      d_accumulator, stream);
  }
  const auto* sign = dynamic_cast<const SignCodec*>(&codec);
  const bool qsgd = codec.id() == CodecId::kQsgd;
  // Signum's message is sign's.
  const bool plain_sign = (sign != nullptr && sign->kind() == SignKind::kSign) || codec.id() == CodecId::kSignum;
  const auto segments = segments_of(layout, plain_sign ? Granularity::kModel : codec.granularity());
  const std::size_t S = segments.size();
  const std::uint32_t levels = qsgd ? dynamic_cast<const QsgdCodec&>(codec).options().s : 1;
  const std::size_t scales_at = kHeaderBytes + (qsgd ? 4 : 0);
  std::size_t total_chunks = 0;
  const auto table = segment_table(segments, total_chunks);
  BALLOT_ASSIGN_OR_RETURN(void* d_segments, workspace.get(kSegments, sizeof(BallotCodecSegment) * S));
  const bool onebit = sign != nullptr && sign->kind() == SignKind::kOneBit;
  const std::size_t num_units = onebit ? 2 * S : S;
  BALLOT_ASSIGN_OR_RETURN(void* d_units, workspace.get(kUnits, 4 * num_units));
  BALLOT_TRY(upload(d_segments, table.data(), sizeof(BallotCodecSegment) * S, stream));
  auto* units = static_cast<float*>(d_units);
  const auto* segments_on_device = static_cast<const BallotCodecSegment*>(d_segments);
  if (plain_sign) {
    BALLOT_TRY(upload(units, &weight, 4, stream));
    return cuda_status(
        ballot_codec_cuda_sign_add(d_message + kHeaderBytes, d, segments_on_device, S, 0, units, d_accumulator, stream),
        "sign decode kernel");
  }
  BALLOT_TRY(cuda_status(
      ballot_codec_cuda_units(d_message + scales_at, num_units, static_cast<float>(levels), weight, units, stream),
      "codec scale kernel"));
  if (sign != nullptr) {
    return cuda_status(ballot_codec_cuda_sign_add(d_message + scales_at + 4 * num_units, d, segments_on_device, S,
                                                  onebit ? 1 : 0, units, d_accumulator, stream),
                       "sign decode kernel");
  }
  return cuda_status(ballot_codec_cuda_dequantize_add(qsgd ? 0 : 1, d_message + scales_at + 4 * S,
                                                      detail::sign_bytes(d), qsgd ? std::bit_width(levels) : 1, d,
                                                      segments_on_device, S, units, d_accumulator, stream),
                     "codec decode kernel");
}

}  // namespace

struct Workspace::Buffers {
  std::array<void*, kNumSlots> pointer{};
  std::array<std::size_t, kNumSlots> bytes{};
  void* host = nullptr;
  std::size_t host_bytes = 0;
};

Workspace::Workspace() : buffers_(std::make_unique<Buffers>()) {}

Workspace::~Workspace() {
  for (void* pointer : buffers_->pointer) {
    if (pointer != nullptr) cudaFree(pointer);
  }
  if (buffers_->host != nullptr) cudaFreeHost(buffers_->host);
}

Result<void*> Workspace::host(std::size_t bytes) {
  if (buffers_->host != nullptr && buffers_->host_bytes >= bytes) return buffers_->host;
  if (buffers_->host != nullptr) {
    BALLOT_TRY(cuda_status(cudaFreeHost(buffers_->host), "cudaFreeHost"));
    buffers_->host = nullptr;
  }
  const std::size_t size = std::max<std::size_t>(bytes, 4096);
  BALLOT_TRY(cuda_status(cudaMallocHost(&buffers_->host, size), "cudaMallocHost"));
  buffers_->host_bytes = size;
  return buffers_->host;
}

Result<void*> Workspace::get(int slot, std::size_t bytes) {
  if (slot < 0 || slot >= kNumSlots) return make_error(ErrorCode::kInvalidArgument, "no such workspace slot");
  const auto at = static_cast<std::size_t>(slot);
  if (buffers_->pointer[at] != nullptr && buffers_->bytes[at] >= bytes) return buffers_->pointer[at];
  if (buffers_->pointer[at] != nullptr) {
    BALLOT_TRY(cuda_status(cudaFree(buffers_->pointer[at]), "cudaFree"));  // waits for the device
    buffers_->pointer[at] = nullptr;
  }
  void* pointer = nullptr;
  BALLOT_TRY(cuda_status(cudaMalloc(&pointer, std::max<std::size_t>(bytes, 256)), "cudaMalloc"));
  buffers_->pointer[at] = pointer;
  buffers_->bytes[at] = std::max<std::size_t>(bytes, 256);
  return pointer;
}

bool on_device(const Codec& codec) noexcept {
  return dynamic_cast<const QsgdCodec*>(&codec) != nullptr || dynamic_cast<const SignCodec*>(&codec) != nullptr ||
         dynamic_cast<const CastCodec*>(&codec) != nullptr || dynamic_cast<const TernGradCodec*>(&codec) != nullptr ||
         dynamic_cast<const TopKCodec*>(&codec) != nullptr || dynamic_cast<const RandomKCodec*>(&codec) != nullptr ||
         dynamic_cast<const ThresholdCodec*>(&codec) != nullptr;
}

bool state_on_device(const Codec& codec) noexcept {
  if (const auto* feedback = dynamic_cast<const ErrorFeedback*>(&codec)) {
    return on_device(feedback->inner()) || dynamic_cast<const SignumCodec*>(&feedback->inner()) != nullptr;
  }
  return dynamic_cast<const SignumCodec*>(&codec) != nullptr || dynamic_cast<const DgcCodec*>(&codec) != nullptr ||
         dynamic_cast<const GlobalTopKCodec*>(&codec) != nullptr;
}

Result<std::size_t> encode(const Codec& codec, const float* d_gradient, const GradientLayout& layout, Rng& rng,
                           std::uint8_t* d_out, Workspace& workspace, void* stream) {
  if (!on_device(codec)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "codec " + codec.spec() + " has no device encoder; encode on the host");
  }
  if (d_out == nullptr || (layout.total_size() > 0 && d_gradient == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "device encode needs a gradient and an output buffer");
  }
  if (const auto* threshold = dynamic_cast<const ThresholdCodec*>(&codec)) {
    return encode_threshold(*threshold, d_gradient, layout, d_out, workspace, stream);
  }
  const auto* elias = dynamic_cast<const QsgdCodec*>(&codec);
  if (elias != nullptr && elias->options().elias) {
    return encode_qsgd_elias(*elias, d_gradient, layout, rng, d_out, workspace, stream);
  }
  const std::size_t bytes = codec.wire_size(layout);  // exact for the others
  if (const auto* cast = dynamic_cast<const CastCodec*>(&codec)) {
    BALLOT_TRY(encode_cast(*cast, d_gradient, layout, bytes, d_out, stream));
  } else if (const auto* qsgd = dynamic_cast<const QsgdCodec*>(&codec)) {
    BALLOT_TRY(encode_quantized(0, qsgd->granularity(), static_cast<float>(qsgd->options().s), qsgd->options().s,
                                CodecId::kQsgd, bytes, d_gradient, layout, rng, d_out, workspace, stream));
  } else if (const auto* terngrad = dynamic_cast<const TernGradCodec*>(&codec)) {
    BALLOT_TRY(encode_quantized(1, terngrad->granularity(), terngrad->options().clip, 0, CodecId::kTernGrad, bytes,
                                d_gradient, layout, rng, d_out, workspace, stream));
  } else if (const auto* sign = dynamic_cast<const SignCodec*>(&codec)) {
    BALLOT_TRY(encode_sign(*sign, d_gradient, layout, d_out, workspace, stream));
  } else if (const auto* random_k = dynamic_cast<const RandomKCodec*>(&codec)) {
    BALLOT_TRY(encode_random_k(*random_k, d_gradient, layout, rng, d_out, workspace, stream));
  } else {
    BALLOT_TRY(encode_top_k(dynamic_cast<const TopKCodec&>(codec).options(), CodecId::kTopK, bytes, d_gradient, layout,
                            d_out, workspace, stream));
  }
  return bytes;
}

namespace {
// Into the workspace's pinned buffer: a copy into pageable memory is staged by the driver at a
// fraction of the link's speed (measured on an H200: 19 MB in 0.37 ms pinned, 1.6 ms pageable).
Result<std::span<const std::uint8_t>> download_message(const std::uint8_t* d_message, std::size_t bytes,
                                                       Workspace& workspace, void* stream) {
  BALLOT_ASSIGN_OR_RETURN(void* pinned, workspace.host(bytes));
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (bytes > 0) {
    BALLOT_TRY(cuda_status(cudaMemcpyAsync(pinned, d_message, bytes, cudaMemcpyDeviceToHost, cuda_stream), "download"));
  }
  BALLOT_TRY(cuda_status(cudaStreamSynchronize(cuda_stream), "encode"));
  return std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(pinned), bytes);
}
}  // namespace

Result<std::span<const std::uint8_t>> encode_to_host(const Codec& codec, const float* d_gradient,
                                                     const GradientLayout& layout, Rng& rng, Workspace& workspace,
                                                     void* stream) {
  BALLOT_ASSIGN_OR_RETURN(void* d_out, workspace.get(kOut, codec.wire_size(layout)));
  BALLOT_ASSIGN_OR_RETURN(const std::size_t bytes,
                          encode(codec, d_gradient, layout, rng, static_cast<std::uint8_t*>(d_out), workspace, stream));
  return download_message(static_cast<const std::uint8_t*>(d_out), bytes, workspace, stream);
}

Status decode_add(const Codec& codec, std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                  float* d_accumulator, float weight, Workspace& workspace, void* stream) {
  const CodecId id = codec.id();
  // signum's message decodes as sign's; dgc's and gtopk's as top-k's.
  if (!on_device(codec) && id != CodecId::kSignum && id != CodecId::kDgc && id != CodecId::kGlobalTopK) {
    return make_error(ErrorCode::kInvalidArgument,
                      "codec " + codec.spec() + " has no device decoder; decode on the host");
  }
  const std::size_t d = layout.total_size();
  if (d > 0 && d_accumulator == nullptr) {
    return make_error(ErrorCode::kInvalidArgument, "device decode needs an accumulator");
  }
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (const auto* cast = dynamic_cast<const CastCodec*>(&codec)) {
    BALLOT_ASSIGN_OR_RETURN(const auto values, cast->values(bytes, layout));
    if (d == 0) return {};
    BALLOT_ASSIGN_OR_RETURN(void* device, workspace.get(kMessage, values.size()));
    BALLOT_TRY(upload(device, values.data(), values.size(), stream));
    BALLOT_TRY(cuda_status(ballot_codec_cuda_cast_add(cast_format(*cast), static_cast<const std::uint8_t*>(device), d,
                                                      weight, d_accumulator, stream),
                           "cast decode kernel"));
    return cuda_status(cudaStreamSynchronize(cuda_stream), "decode");
  }
  // Validate on the host (the CPU decoder's checks), then copy the streams (or the sparse codecs'
  // message) and the per-segment tables in one upload. mode: 0 QSGD, 1 TernGrad, 2 the sign
  // codecs, −1 the sparse codecs.
  int mode = -1;
  int planes = 0;
  std::vector<Segment> segments;
  std::vector<float> unit;
  std::span<const std::uint8_t> streams;
  detail::QsgdPlanes qsgd;  // holds an Elias-coded message's levels, transcoded into planes
  // The sparse codecs: the (index, value) pairs per segment; random-k's indices come from its stream.
  std::vector<std::size_t> counts;
  std::size_t indices_at = 0, values_at = 0;
  std::vector<std::uint32_t> drawn;
  if (id == CodecId::kQsgd) {
    BALLOT_ASSIGN_OR_RETURN(qsgd, detail::read_qsgd_planes(bytes, layout));
    mode = 0;
    planes = qsgd.planes;
    segments = qsgd.segments;
    for (std::size_t k = 0; k < segments.size(); ++k) {
      unit.push_back(weight * (load_pod<float>(qsgd.norms.data() + 4 * k) / static_cast<float>(qsgd.s)));
    }
    streams = qsgd.streams;
  } else if (id == CodecId::kTernGrad) {
    BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_terngrad_streams(bytes, layout));
    mode = 1;
    planes = 1;
    segments = view.segments;
    for (std::size_t k = 0; k < segments.size(); ++k) {
      unit.push_back(weight * load_pod<float>(view.scales.data() + 4 * k));
    }
    streams = view.streams;
  } else if (id == CodecId::kSign || id == CodecId::kSignum || id == CodecId::kScaledSign || id == CodecId::kOneBit) {
    const std::size_t per_segment =
        id == CodecId::kSign || id == CodecId::kSignum ? 0 : (id == CodecId::kOneBit ? 2 : 1);
    BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sign_stream(bytes, layout, id, per_segment));
    mode = 2;
    segments = view.segments;
    // As the CPU decoder: (weight · scale) · (±1), weight · (±1) for sign and signum (one segment), or
    // weight · (the segment's mean for the bit) for onebit.
    if (per_segment == 0) unit.push_back(weight);
    for (std::size_t j = 0; j < per_segment * segments.size(); ++j) {
      unit.push_back(weight * load_pod<float>(view.scales.data() + 4 * j));
    }
    streams = view.signs;
  } else if (id == CodecId::kRandomK) {
    BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_random_k(bytes, layout));
    segments = view.segments;
    counts.assign(view.counts.begin(), view.counts.end());
    Rng rng(view.seed, view.stream);
    rng.seek(view.position);
    drawn = random_k_indices(rng, segments, counts);
    values_at = static_cast<std::size_t>(view.values.data() - bytes.data());
  } else {
    const std::uint8_t flags = id == CodecId::kGlobalTopK ? GlobalTopKCodec::kGlobalFlag : 0;
    BALLOT_ASSIGN_OR_RETURN(const auto view, detail::read_sparse(bytes, id, flags, layout));
    segments = view.segments;
    counts.assign(view.counts.begin(), view.counts.end());
    indices_at = static_cast<std::size_t>(view.indices.data() - bytes.data());
    values_at = static_cast<std::size_t>(view.values.data() - bytes.data());
  }
  if (d == 0) return {};
  const std::size_t S = segments.size();
  // Layout of the upload: the streams (the sparse codecs: the message), padded to 8 bytes; then
  // per-segment tables (and random-k's indices).
  const std::span<const std::uint8_t> payload = mode >= 0 ? streams : bytes;
  std::vector<std::uint8_t> host((payload.size() + 7) / 8 * 8);
  std::memcpy(host.data(), payload.data(), payload.size());
  constexpr std::size_t streams_at = 0;
  if (mode >= 0) {
    std::size_t total_chunks = 0;
    const auto table = segment_table(segments, total_chunks);
    const std::size_t table_at = host.size();
    host.resize(table_at + sizeof(BallotCodecSegment) * S + 4 * unit.size());
    std::memcpy(host.data() + table_at, table.data(), sizeof(BallotCodecSegment) * S);
    std::memcpy(host.data() + table_at + sizeof(BallotCodecSegment) * S, unit.data(), 4 * unit.size());
    BALLOT_ASSIGN_OR_RETURN(void* device, workspace.get(kMessage, host.size()));
    BALLOT_TRY(upload(device, host.data(), host.size(), stream));
    auto* base = static_cast<std::uint8_t*>(device);
    const auto* d_segments = reinterpret_cast<const BallotCodecSegment*>(base + table_at);
    const auto* d_unit = reinterpret_cast<const float*>(base + table_at + sizeof(BallotCodecSegment) * S);
    if (mode == 2) {
      BALLOT_TRY(cuda_status(ballot_codec_cuda_sign_add(base + streams_at, d, d_segments, S,
                                                        id == CodecId::kOneBit ? 1 : 0, d_unit, d_accumulator, stream),
                             "sign decode kernel"));
    } else {
      BALLOT_TRY(cuda_status(ballot_codec_cuda_dequantize_add(mode, base + streams_at, detail::sign_bytes(d), planes, d,
                                                              d_segments, S, d_unit, d_accumulator, stream),
                             "codec decode kernel"));
    }
  } else {
    std::uint64_t total = 0;
    const auto tables = sparse_tables(segments, counts, total);
    const std::size_t table_at = host.size();
    host.resize(table_at + 16 * S);
    std::memcpy(host.data() + table_at, tables.data(), 16 * S);
    if (!drawn.empty()) {
      indices_at = host.size();
      host.resize(indices_at + 4 * drawn.size());
      std::memcpy(host.data() + indices_at, drawn.data(), 4 * drawn.size());
    }
    BALLOT_ASSIGN_OR_RETURN(void* device, workspace.get(kMessage, host.size()));
    BALLOT_TRY(upload(device, host.data(), host.size(), stream));
    auto* base = static_cast<std::uint8_t*>(device);
    BALLOT_TRY(sparse_add(base + indices_at, base + values_at, total,
                          reinterpret_cast<const std::uint64_t*>(base + table_at), S, weight, d_accumulator, stream));
  }
  return cuda_status(cudaStreamSynchronize(cuda_stream), "decode");
}

// ---- codecs with their state on the device --------------------------------------------------------

Result<std::unique_ptr<DeviceStatefulCodec>> DeviceStatefulCodec::create(const Codec& codec) {
  if (dynamic_cast<const SignumCodec*>(&codec) != nullptr) {
    BALLOT_ASSIGN_OR_RETURN(auto signum, DeviceSignum::create(codec));
    return std::unique_ptr<DeviceStatefulCodec>(std::move(signum));
  }
  if (dynamic_cast<const DgcCodec*>(&codec) != nullptr) {
    BALLOT_ASSIGN_OR_RETURN(auto dgc, DeviceDgc::create(codec));
    return std::unique_ptr<DeviceStatefulCodec>(std::move(dgc));
  }
  if (dynamic_cast<const GlobalTopKCodec*>(&codec) != nullptr) {
    BALLOT_ASSIGN_OR_RETURN(auto gtopk, DeviceGlobalTopK::create(codec));
    return std::unique_ptr<DeviceStatefulCodec>(std::move(gtopk));
  }
  if (dynamic_cast<const ErrorFeedback*>(&codec) == nullptr) {
    return make_error(ErrorCode::kInvalidArgument,
                      "state on the device is error feedback's (ef=1 over a codec with a device encoder), "
                      "signum's, dgc's or gtopk's; got " +
                          codec.spec());
  }
  BALLOT_ASSIGN_OR_RETURN(auto feedback, DeviceErrorFeedback::create(codec));
  return std::unique_ptr<DeviceStatefulCodec>(std::move(feedback));
}

Result<std::span<const std::uint8_t>> DeviceStatefulCodec::encode_to_host(const float* d_gradient,
                                                                          const GradientLayout& layout, Rng& rng,
                                                                          void* stream) {
  BALLOT_ASSIGN_OR_RETURN(void* d_out, workspace_.get(kOut, wire_size(layout)));
  BALLOT_ASSIGN_OR_RETURN(const std::size_t bytes,
                          encode(d_gradient, layout, rng, static_cast<std::uint8_t*>(d_out), stream));
  return download_message(static_cast<const std::uint8_t*>(d_out), bytes, workspace_, stream);
}

// ---- error feedback on the device ----------------------------------------------------------------

Result<std::unique_ptr<DeviceErrorFeedback>> DeviceErrorFeedback::create(const Codec& codec) {
  const auto* feedback = dynamic_cast<const ErrorFeedback*>(&codec);
  if (feedback == nullptr || !state_on_device(codec)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "device error feedback needs ef=1 over a codec with a device encoder (fp32, fp16, bf16, sign, "
                      "scaled_sign, onebit, signum, qsgd, terngrad, topk, randomk, threshold); got " +
                          codec.spec());
  }
  // A copy of the inner codec from its options (its spec string rounds ratios and clips to six
  // decimals, which would change the budget or the limit).
  std::unique_ptr<Codec> inner;
  if (const auto* signum = dynamic_cast<const SignumCodec*>(&feedback->inner())) {
    // Signum keeps its own momentum, on the device too.
    inner = std::make_unique<SignumCodec>(signum->options());
    BALLOT_ASSIGN_OR_RETURN(auto momentum, DeviceSignum::create(*inner));
    auto twin = std::unique_ptr<DeviceErrorFeedback>(new DeviceErrorFeedback(std::move(inner)));
    twin->inner_state_ = std::move(momentum);
    return twin;
  }
  if (const auto* qsgd = dynamic_cast<const QsgdCodec*>(&feedback->inner())) {
    inner = std::make_unique<QsgdCodec>(qsgd->options());
  } else if (const auto* terngrad = dynamic_cast<const TernGradCodec*>(&feedback->inner())) {
    inner = std::make_unique<TernGradCodec>(terngrad->options());
  } else if (const auto* sign = dynamic_cast<const SignCodec*>(&feedback->inner())) {
    inner = std::make_unique<SignCodec>(sign->kind(), sign->granularity());
  } else if (const auto* random_k = dynamic_cast<const RandomKCodec*>(&feedback->inner())) {
    inner = std::make_unique<RandomKCodec>(random_k->options());
  } else if (const auto* threshold = dynamic_cast<const ThresholdCodec*>(&feedback->inner())) {
    inner = std::make_unique<ThresholdCodec>(threshold->options());
  } else if (const auto* cast = dynamic_cast<const CastCodec*>(&feedback->inner())) {
    inner = std::make_unique<CastCodec>(cast->format());
  } else {
    inner = std::make_unique<TopKCodec>(dynamic_cast<const TopKCodec&>(feedback->inner()).options());
  }
  return std::unique_ptr<DeviceErrorFeedback>(new DeviceErrorFeedback(std::move(inner)));
}

DeviceErrorFeedback::DeviceErrorFeedback(std::unique_ptr<Codec> inner) : inner_(std::move(inner)) {}

DeviceErrorFeedback::~DeviceErrorFeedback() {
  if (memory_ != nullptr) cudaFree(memory_);
  if (corrected_ != nullptr) cudaFree(corrected_);
}

Status DeviceErrorFeedback::resize(std::size_t d, void* stream) {
  if (d == size_ && (d == 0 || memory_ != nullptr)) return {};
  if (memory_ != nullptr) BALLOT_TRY(cuda_status(cudaFree(memory_), "cudaFree"));
  if (corrected_ != nullptr) BALLOT_TRY(cuda_status(cudaFree(corrected_), "cudaFree"));
  memory_ = corrected_ = nullptr;
  size_ = 0;
  if (d == 0) return {};
  void* a = nullptr;
  void* b = nullptr;
  BALLOT_TRY(cuda_status(cudaMalloc(&a, 4 * d), "cudaMalloc"));
  memory_ = static_cast<float*>(a);
  BALLOT_TRY(cuda_status(cudaMalloc(&b, 4 * d), "cudaMalloc"));
  corrected_ = static_cast<float*>(b);
  BALLOT_TRY(cuda_status(cudaMemsetAsync(memory_, 0, 4 * d, static_cast<cudaStream_t>(stream)), "memset"));
  size_ = d;  // only once the memory is zero: a failure leaves no state to encode from
  return {};
}

Result<std::size_t> DeviceErrorFeedback::encode(const float* d_gradient, const GradientLayout& layout, Rng& rng,
                                                std::uint8_t* d_out, void* stream) {
  const std::size_t d = layout.total_size();
  if (d_out == nullptr || (d > 0 && d_gradient == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "device encode needs a gradient and an output buffer");
  }
  BALLOT_TRY(resize(d, stream));
  // p = g + e;  Δ = C(p);  e = p − decode(Δ), with Δ exactly as every receiver decodes it.
  BALLOT_TRY(cuda_status(ballot_codec_cuda_add(d_gradient, memory_, d, corrected_, stream), "add kernel"));
  const Rng drawn_from = rng;  // random-k's index stream, drawn again by decode_own
  BALLOT_ASSIGN_OR_RETURN(const std::size_t bytes,
                          inner_state_ ? inner_state_->encode(corrected_, layout, rng, d_out, stream)
                                       : cuda::encode(*inner_, corrected_, layout, rng, d_out, workspace_, stream));
  // The new memory is built in corrected_ and swapped in only when complete: a failure leaves e.
  BALLOT_TRY(decode_own(*inner_, d_out, bytes, layout, drawn_from, corrected_, -1.0f, workspace_, stream));
  BALLOT_TRY(cuda_status(ballot_codec_cuda_zero_non_finite(corrected_, d, stream), "zero_non_finite kernel"));
  std::swap(memory_, corrected_);
  return bytes;
}

void DeviceErrorFeedback::reset_state() {
  if (memory_ != nullptr) cudaFree(memory_);
  if (corrected_ != nullptr) cudaFree(corrected_);
  memory_ = corrected_ = nullptr;
  size_ = 0;
  if (inner_state_) inner_state_->reset_state();
}

Result<std::vector<std::uint8_t>> DeviceErrorFeedback::save_state(void* stream) {
  std::vector<float> memory(size_);
  BALLOT_TRY(download(memory.data(), memory_, 4 * size_, stream));
  if (inner_state_) {
    BALLOT_ASSIGN_OR_RETURN(const auto inner, inner_state_->save_state(stream));
    return write_state(inner_->id(), memory, inner);
  }
  return write_state(inner_->id(), memory, inner_->save_state());
}

Status DeviceErrorFeedback::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout,
                                       void* stream) {
  BALLOT_ASSIGN_OR_RETURN(StateView view, read_state(state, inner_->id(), layout));
  BALLOT_TRY(inner_->load_state(view.inner, layout));  // the CPU codec's own checks of its state
  if (inner_state_) BALLOT_TRY(inner_state_->load_state(view.inner, layout, stream));
  BALLOT_TRY(resize(view.memory.size(), stream));
  BALLOT_TRY(upload(memory_, view.memory.data(), 4 * view.memory.size(), stream));
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "load_state");
}

// ---- Signum's momentum on the device ---------------------------------------------------------------

Result<std::unique_ptr<DeviceSignum>> DeviceSignum::create(const Codec& codec) {
  BALLOT_ASSIGN_OR_RETURN(const auto* signum, twin_of<SignumCodec>(codec, "a device Signum needs the signum codec"));
  return std::unique_ptr<DeviceSignum>(new DeviceSignum(signum->options()));
}

DeviceSignum::~DeviceSignum() {
  if (momentum_ != nullptr) cudaFree(momentum_);
}

std::size_t DeviceSignum::wire_size(const GradientLayout& layout) const {
  return kHeaderBytes + detail::sign_bytes(layout.total_size());
}

Status DeviceSignum::resize(std::size_t d, void* stream) { return fit_zeroed(momentum_, size_, d, 1, stream); }

Result<std::size_t> DeviceSignum::encode(const float* d_gradient, const GradientLayout& layout, Rng&,
                                         std::uint8_t* d_out, void* stream) {
  const std::size_t d = layout.total_size();
  if (d_out == nullptr || (d > 0 && d_gradient == nullptr) || reinterpret_cast<std::uintptr_t>(d_out) % 8 != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "device signum needs a gradient and an 8-byte aligned output buffer");
  }
  BALLOT_TRY(resize(d, stream));
  // As SignumCodec::encode: the header, then m ← βm + (1 − β)g and sign(m) packed (bit 1 = m ≥ 0).
  std::vector<std::uint8_t> prefix;
  write_header(prefix, CodecId::kSignum, Granularity::kModel, 0, layout, detail::sign_bytes(d));
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  if (d > 0) {
    BALLOT_TRY(kernels::cuda::momentum_pack_signs(momentum_, d_gradient, d, kernels::momentum_factors(options_.beta),
                                                  reinterpret_cast<std::uint64_t*>(d_out + kHeaderBytes), stream));
    BALLOT_TRY(cuda_status(ballot_codec_cuda_zero_non_finite(momentum_, d, stream), "zero_non_finite kernel"));
  }
  return wire_size(layout);
}

Result<std::vector<std::uint8_t>> DeviceSignum::save_state(void* stream) {
  std::vector<float> momentum(size_);
  BALLOT_TRY(download(momentum.data(), momentum_, 4 * size_, stream));
  return write_state(CodecId::kSignum, momentum);
}

Status DeviceSignum::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) {
  SignumCodec host(options_);  // the CPU codec's own checks of the blob
  BALLOT_TRY(host.load_state(state, layout));
  BALLOT_TRY(resize(host.momentum().size(), stream));
  BALLOT_TRY(upload(momentum_, host.momentum().data(), 4 * host.momentum().size(), stream));
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "load_state");
}

void DeviceSignum::reset_state() {
  if (momentum_ != nullptr) cudaFree(momentum_);
  momentum_ = nullptr;
  size_ = 0;
}

// ---- DGC's state on the device -----------------------------------------------------------------------

namespace {

// The message of a sparse codec whose counts are known only after the selection (DGC): the header
// and counts from the host, then the indices and values gathered in the workspace. Returns its size.
Result<std::size_t> write_sparse_message(CodecId id, Granularity granularity, const GradientLayout& layout,
                                         std::span<const std::size_t> counts, const std::uint8_t* d_indices,
                                         const std::uint8_t* d_values, std::uint8_t* d_out, void* stream) {
  std::size_t total = 0;
  for (const std::size_t count : counts) total += count;
  std::vector<std::uint8_t> prefix;
  write_header(prefix, id, granularity, 0, layout, 4 * counts.size() + 8 * total);
  for (const std::size_t count : counts) append_pod<std::uint32_t>(prefix, static_cast<std::uint32_t>(count));
  BALLOT_TRY(upload(d_out, prefix.data(), prefix.size(), stream));
  BALLOT_TRY(copy_on_device(d_out + prefix.size(), d_indices, 4 * total, stream));
  BALLOT_TRY(copy_on_device(d_out + prefix.size() + 4 * total, d_values, 4 * total, stream));
  return prefix.size() + 8 * total;
}

}  // namespace

Result<std::unique_ptr<DeviceDgc>> DeviceDgc::create(const Codec& codec) {
  BALLOT_ASSIGN_OR_RETURN(const auto* dgc, twin_of<DgcCodec>(codec, "a device DGC needs the dgc codec"));
  return std::unique_ptr<DeviceDgc>(new DeviceDgc(dgc->options()));
}

DeviceDgc::~DeviceDgc() {
  if (state_ != nullptr) cudaFree(state_);
}

Status DeviceDgc::resize(std::size_t d, void* stream) {
  // As the CPU: u and v restart at zero when the gradient's size changes; the round count goes on.
  return fit_zeroed(state_, size_, d, 2, stream);
}

Result<std::size_t> DeviceDgc::encode(const float* d_gradient, const GradientLayout& layout, Rng& rng,
                                      std::uint8_t* d_out, void* stream) {
  const std::size_t d = layout.total_size();
  if (d_out == nullptr || (d > 0 && d_gradient == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "device encode needs a gradient and an output buffer");
  }
  const DgcOptions& options = host_.options();
  const auto segments = segments_of(layout, options.granularity);
  const std::size_t S = segments.size();
  for (const Segment& segment : segments) {
    if (segment.size > std::size_t{UINT32_MAX}) {
      return make_error(ErrorCode::kInvalidArgument, "dgc: segments must have fewer than 2^32 coordinates");
    }
  }
  BALLOT_TRY(resize(d, stream));
  float* u = state_;
  float* v = state_ + d;
  const auto budgets = detail::sparse_budgets(segments, 0, host_.density(rounds_));
  // Every buffer first: nothing below fails but the device itself, once u and v have moved.
  std::size_t budget = 0, largest = 0, most_samples = 0, largest_sampled = 0;
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t n = segments[s].size, k = budgets[s];
    if (k == 0) continue;
    budget += k;
    largest = std::max(largest, n);
    const std::size_t samples = host_.sample_count(n, k);
    if (k < n && samples > 0 && samples < n) {
      most_samples = std::max(most_samples, samples);
      largest_sampled = std::max(largest_sampled, n);
    }
  }
  std::size_t total_chunks = 0;
  const auto table = segment_table(segments, total_chunks);
  BALLOT_ASSIGN_OR_RETURN(void* d_segments, workspace_.get(kSegments, sizeof(BallotCodecSegment) * S));
  BALLOT_ASSIGN_OR_RETURN(void* scratch, workspace_.get(kScratch, 8 * 3 * std::max<std::size_t>(total_chunks, 1)));
  BALLOT_ASSIGN_OR_RETURN(void* d_factors, workspace_.get(kFactors, 4 * std::max<std::size_t>(S, 1)));
  BALLOT_ASSIGN_OR_RETURN(void* selected, workspace_.get(kSelected, 8 * std::max<std::size_t>(budget, 1)));
  auto* indices = static_cast<std::uint8_t*>(selected);  // Σ budgets u32 indices, then their values
  std::uint8_t* values = indices + 4 * budget;
  const std::size_t topk_bytes = ballot_codec_cuda_topk_workspace(largest);
  BALLOT_ASSIGN_OR_RETURN(void* topk_scratch, workspace_.get(kTopK, topk_bytes));
  void* candidates = nullptr;
  void* pass_scratch = nullptr;
  void* sample = nullptr;
  const std::size_t pass_bytes = ballot_codec_cuda_threshold_workspace(largest_sampled);
  if (most_samples > 0) {
    BALLOT_ASSIGN_OR_RETURN(candidates, workspace_.get(kCandidates, 4 * largest_sampled));
    BALLOT_ASSIGN_OR_RETURN(pass_scratch, workspace_.get(kThresholdTemp, 256 + pass_bytes));
    BALLOT_ASSIGN_OR_RETURN(sample, workspace_.get(kSample, 8 * most_samples));
  }
  if (d > 0 && S > 0) {
    // §3.2 and §3.1: the clipping factors, then u ← m·u + f·g, v ← v + u in one pass.
    BALLOT_TRY(upload(d_segments, table.data(), sizeof(BallotCodecSegment) * S, stream));
    const auto* segments_on_device = static_cast<const BallotCodecSegment*>(d_segments);
    const float* factors = nullptr;
    if (options.clip > 0.0f) {
      BALLOT_TRY(cuda_status(ballot_codec_cuda_factors(4, 1, d_gradient, segments_on_device, S, total_chunks,
                                                       static_cast<double*>(scratch), nullptr, options.clip, nullptr,
                                                       static_cast<float*>(d_factors), nullptr, nullptr, stream),
                             "dgc clipping kernel"));
      factors = static_cast<const float*>(d_factors);
    }
    BALLOT_TRY(cuda_status(ballot_codec_cuda_momentum_accumulate(d_gradient, d, segments_on_device, S, factors,
                                                                 options.momentum, u, v, stream),
                           "dgc accumulation kernel"));
  }
  std::vector<std::size_t> counts(S, 0);
  if (budget > 0) {
    std::size_t done = 0;
    for (std::size_t s = 0; s < S; ++s) {
      const std::size_t n = segments[s].size, k = budgets[s];
      if (k == 0) continue;
      float* v_s = v + segments[s].offset;
      std::uint8_t* out_indices = indices + 4 * done;
      std::uint8_t* out_values = values + 4 * done;
      const std::size_t samples = host_.sample_count(n, k);
      // detail::select_by_sampled_threshold, with x on the device.
      bool exact = k >= n || samples == 0 || samples >= n;
      std::size_t count = k;
      if (!exact) {
        std::vector<std::uint32_t> drawn(samples);
        for (auto& i : drawn) i = static_cast<std::uint32_t>(rng.uniform_int(n));
        auto* sample_indices = static_cast<std::uint8_t*>(sample);
        std::uint8_t* sample_values = sample_indices + 4 * samples;
        BALLOT_TRY(upload(sample_indices, drawn.data(), 4 * samples, stream));
        BALLOT_TRY(cuda_status(ballot_codec_cuda_gather(v_s, sample_indices, samples, 0, 1.0f, sample_values, stream),
                               "dgc sample kernel"));
        std::vector<float> keys(samples);
        BALLOT_TRY(download(keys.data(), sample_values, 4 * samples, stream));
        for (float& key : keys) key = detail::selection_key(key);
        auto* d_count = static_cast<std::uint32_t*>(pass_scratch);
        Status failed;
        const auto selection = detail::sampled_threshold_passes(keys, n, k, [&](float threshold) -> std::size_t {
          std::uint32_t passing = 0;
          failed = cuda_status(
              ballot_codec_cuda_threshold(v_s, n, threshold, static_cast<std::uint8_t*>(pass_scratch) + 256, pass_bytes,
                                          static_cast<std::uint8_t*>(candidates), d_count, stream),
              "dgc threshold select");
          if (failed.ok()) failed = download(&passing, d_count, 4, stream);
          return failed.ok() ? passing : n;  // a failure ends the passes; it is returned below
        });
        BALLOT_TRY(failed);
        exact = selection.exact;
        count = selection.selected;
        if (!exact) {
          BALLOT_TRY(copy_on_device(out_indices, candidates, 4 * count, stream));
          BALLOT_TRY(cuda_status(ballot_codec_cuda_gather(v_s, out_indices, count, 0, 1.0f, out_values, stream),
                                 "dgc gather kernel"));
        }
      }
      if (exact) {
        count = k;
        BALLOT_TRY(
            cuda_status(ballot_codec_cuda_topk(v_s, n, k, topk_scratch, topk_bytes, out_indices, out_values, stream),
                        "dgc top-k kernels"));
      }
      // §3.2, momentum factor masking: what is sent leaves both the accumulation and the momentum.
      BALLOT_TRY(cuda_status(ballot_codec_cuda_zero_at(out_indices, count, u + segments[s].offset, v_s, stream),
                             "dgc masking kernel"));
      counts[s] = count;
      done += count;
    }
  }
  ++rounds_;
  return write_sparse_message(CodecId::kDgc, options.granularity, layout, counts, indices, values, d_out, stream);
}

Result<std::vector<std::uint8_t>> DeviceDgc::save_state(void* stream) {
  std::vector<float> both(2 * size_);
  BALLOT_TRY(download(both.data(), state_, 4 * both.size(), stream));
  const std::span<const float> all(both);
  return DgcCodec::state_blob(all.first(size_), all.subspan(size_), rounds_);
}

Status DeviceDgc::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) {
  DgcCodec host(host_.options());  // the CPU codec's own checks of the blob
  BALLOT_TRY(host.load_state(state, layout));
  const std::size_t d = host.velocity().size();
  BALLOT_TRY(resize(d, stream));
  BALLOT_TRY(upload(state_, host.momentum().data(), 4 * d, stream));
  BALLOT_TRY(upload(state_ + d, host.velocity().data(), 4 * d, stream));
  rounds_ = host.rounds();
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "load_state");
}

void DeviceDgc::reset_state() {
  if (state_ != nullptr) cudaFree(state_);
  state_ = nullptr;
  size_ = 0;
  rounds_ = 0;
}

// ---- global top-k's residual on the device -------------------------------------------------------------

Result<std::unique_ptr<DeviceGlobalTopK>> DeviceGlobalTopK::create(const Codec& codec) {
  BALLOT_ASSIGN_OR_RETURN(const auto* gtopk,
                          twin_of<GlobalTopKCodec>(codec, "a device global top-k needs the gtopk codec"));
  return std::unique_ptr<DeviceGlobalTopK>(new DeviceGlobalTopK(gtopk->options()));
}

DeviceGlobalTopK::~DeviceGlobalTopK() {
  if (residual_ != nullptr) cudaFree(residual_);
  if (sent_ != nullptr) cudaFree(sent_);
}

Status DeviceGlobalTopK::resize(std::size_t d, void* stream) { return fit_zeroed(residual_, size_, d, 1, stream); }

Result<std::size_t> DeviceGlobalTopK::encode(const float* d_gradient, const GradientLayout& layout, Rng&,
                                             std::uint8_t* d_out, void* stream) {
  const std::size_t d = layout.total_size();
  if (d_out == nullptr || (d > 0 && d_gradient == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "device encode needs a gradient and an output buffer");
  }
  // As the CPU: a new encode forgets the last selection, whatever happens below.
  sent_segments_.clear();
  sent_counts_.clear();
  BALLOT_TRY(resize(d, stream));
  const SparseOptions& options = host_.options();
  const std::size_t bytes = host_.wire_size(layout);
  const auto segments = segments_of(layout, options.granularity);
  const auto budgets = detail::sparse_budgets(segments, options.k, options.ratio);
  std::size_t total = 0, largest = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    total += budgets[s];
    if (budgets[s] > 0) largest = std::max(largest, segments[s].size);
  }
  // Every buffer first (the top-k's scratch as encode_top_k asks for it): nothing below fails but
  // the device itself, once the residual has moved.
  BALLOT_TRY(workspace_.get(kTopK, ballot_codec_cuda_topk_workspace(largest)));
  if (8 * total > sent_capacity_) {
    if (sent_ != nullptr) cudaFree(sent_);
    sent_ = nullptr;
    sent_capacity_ = 0;
    void* memory = nullptr;
    BALLOT_TRY(cuda_status(cudaMalloc(&memory, 8 * total), "cudaMalloc"));
    sent_ = static_cast<std::uint8_t*>(memory);
    sent_capacity_ = 8 * total;
  }
  // Shi et al. 2019, Alg. 2: accumulate the residual, select locally, keep the rest.
  BALLOT_TRY(cuda_status(ballot_codec_cuda_add(residual_, d_gradient, d, residual_, stream), "add kernel"));
  BALLOT_TRY(encode_top_k(options, CodecId::kGlobalTopK, bytes, residual_, layout, d_out, workspace_, stream));
  const std::uint8_t* indices = d_out + kHeaderBytes + 4 * segments.size();
  std::size_t done = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    BALLOT_TRY(cuda_status(
        ballot_codec_cuda_zero_at(indices + 4 * done, budgets[s], residual_ + segments[s].offset, nullptr, stream),
        "gtopk residual kernel"));
    done += budgets[s];
  }
  // The selection, kept for accept_global() (the caller may reuse d_out).
  BALLOT_TRY(copy_on_device(sent_, indices, 8 * total, stream));
  sent_segments_ = segments;
  sent_counts_ = budgets;
  return bytes;
}

Status DeviceGlobalTopK::accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout,
                                       void* stream) {
  BALLOT_ASSIGN_OR_RETURN(const auto view,
                          detail::read_sparse(global, CodecId::kGlobalTopK, GlobalTopKCodec::kGlobalFlag, layout));
  if (!(view.header.flags & GlobalTopKCodec::kGlobalFlag)) {
    return malformed("accept_global() got a worker message, not the aggregator's global set");
  }
  if (size_ != layout.total_size()) return {};  // nothing sent yet
  std::size_t total = 0;
  for (const std::size_t count : sent_counts_) total += count;
  std::vector<std::uint32_t> sent(2 * total);  // indices, then the values' bits
  BALLOT_TRY(download(sent.data(), sent_, 8 * total, stream));
  // Both lists are increasing (by segment, then index): a merge finds the sent entries the global
  // set did not take, kept per segment for the sparse decoder's tables.
  std::vector<std::size_t> chosen;
  chosen.reserve(view.indices.size() / 4);
  for (std::size_t s = 0, j = 0; s < view.segments.size(); ++s) {
    for (std::uint32_t c = 0; c < view.counts[s]; ++c, ++j) {
      chosen.push_back(view.segments[s].offset + load_pod<std::uint32_t>(view.indices.data() + 4 * j));
    }
  }
  std::vector<std::uint32_t> back_indices, back_values;
  std::vector<std::size_t> back_counts(sent_segments_.size(), 0);
  std::size_t g = 0;
  for (std::size_t s = 0, t = 0; s < sent_segments_.size(); ++s) {
    for (std::size_t c = 0; c < sent_counts_[s]; ++c, ++t) {
      const std::size_t index = sent_segments_[s].offset + sent[t];
      while (g < chosen.size() && chosen[g] < index) ++g;
      if (g < chosen.size() && chosen[g] == index) continue;
      // As the CPU codec: a non-finite value went out once and is not kept.
      if (!std::isfinite(std::bit_cast<float>(sent[total + t]))) continue;
      back_indices.push_back(sent[t]);
      back_values.push_back(sent[total + t]);
      ++back_counts[s];
    }
  }
  sent_counts_.assign(sent_segments_.size(), 0);
  std::uint64_t back = 0;
  const auto tables = sparse_tables(sent_segments_, back_counts, back);
  if (back == 0) return {};
  std::vector<std::uint8_t> host(8 * back + 8 * tables.size());
  std::memcpy(host.data(), back_indices.data(), 4 * back);
  std::memcpy(host.data() + 4 * back, back_values.data(), 4 * back);
  std::memcpy(host.data() + 8 * back, tables.data(), 8 * tables.size());
  BALLOT_ASSIGN_OR_RETURN(void* device, workspace_.get(kMessage, host.size()));
  BALLOT_TRY(upload(device, host.data(), host.size(), stream));
  auto* base = static_cast<std::uint8_t*>(device);
  BALLOT_TRY(sparse_add(base, base + 4 * back, back, reinterpret_cast<const std::uint64_t*>(base + 8 * back),
                        sent_segments_.size(), 1.0f, residual_, stream));
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "accept_global");
}

Result<std::vector<std::uint8_t>> DeviceGlobalTopK::save_state(void* stream) {
  std::vector<float> residual(size_);
  BALLOT_TRY(download(residual.data(), residual_, 4 * size_, stream));
  return write_state(CodecId::kGlobalTopK, residual);
}

Status DeviceGlobalTopK::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) {
  GlobalTopKCodec host(host_.options());  // the CPU codec's own checks of the blob
  BALLOT_TRY(host.load_state(state, layout));
  const std::size_t d = host.residual().size();
  BALLOT_TRY(resize(d, stream));
  BALLOT_TRY(upload(residual_, host.residual().data(), 4 * d, stream));
  sent_counts_.clear();
  sent_segments_.clear();
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "load_state");
}

void DeviceGlobalTopK::reset_state() {
  if (residual_ != nullptr) cudaFree(residual_);
  residual_ = nullptr;
  size_ = 0;
  sent_counts_.clear();
  sent_segments_.clear();
}

Result<EncodedGradient> encode_on_device(const Codec& codec, std::span<const float> gradient,
                                         const GradientLayout& layout, Rng& rng) {
  if (gradient.size() != layout.total_size()) {
    return make_error(ErrorCode::kInvalidArgument, "the gradient does not match the layout");
  }
  BALLOT_TRY(require_device());
  Workspace workspace;
  EncodedGradient out;
  out.bytes.resize(codec.wire_size(layout));
  BALLOT_ASSIGN_OR_RETURN(void* d_gradient, workspace.get(kHostIo, 4 * gradient.size() + out.bytes.size() + 16));
  auto* d_out = static_cast<std::uint8_t*>(d_gradient) + (4 * gradient.size() + 15) / 16 * 16;
  BALLOT_TRY(upload(d_gradient, gradient.data(), 4 * gradient.size(), nullptr));
  BALLOT_ASSIGN_OR_RETURN(const std::size_t bytes,
                          encode(codec, static_cast<const float*>(d_gradient), layout, rng, d_out, workspace, nullptr));
  out.bytes.resize(bytes);
  BALLOT_TRY(cuda_status(cudaMemcpy(out.bytes.data(), d_out, bytes, cudaMemcpyDeviceToHost), "download"));
  return out;
}

Status decode_add_on_device(const Codec& codec, std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                            std::span<float> accumulator, float weight) {
  if (accumulator.size() != layout.total_size()) {
    return make_error(ErrorCode::kInvalidArgument, "the accumulator does not match the layout");
  }
  BALLOT_TRY(require_device());
  Workspace workspace;
  BALLOT_ASSIGN_OR_RETURN(void* d_accumulator, workspace.get(kHostIo, 4 * accumulator.size()));
  BALLOT_TRY(upload(d_accumulator, accumulator.data(), 4 * accumulator.size(), nullptr));
  BALLOT_TRY(decode_add(codec, bytes, layout, static_cast<float*>(d_accumulator), weight, workspace, nullptr));
  return cuda_status(cudaMemcpy(accumulator.data(), d_accumulator, 4 * accumulator.size(), cudaMemcpyDeviceToHost),
                     "download");
}

}  // namespace ballot::coding::cuda
