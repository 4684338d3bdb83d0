// The codecs on a CUDA device, for a worker whose gradient is in GPU memory: every codec of the
// registry encodes on the device (the fp32, fp16 and bf16 casts, sign, scaled sign, 1-bit SGD,
// QSGD with either coding, TernGrad, top-k, random-k and threshold; Signum, DGC and global top-k
// with their state kept there), the device decoders add a peer's message to a device accumulator,
// and error feedback over them keeps its memory there.
//
// Bit-identical to the CPU codecs (coding/cast_codecs.h, coding/sign_codecs.h, coding/quantizers.h,
// coding/sparse_codecs.h, coding/dgc.h, coding/global_topk.h): encode() writes exactly the bytes codec.encode() returns
// for the same gradient, layout and Rng, and moves the Rng the same way; decode_add() adds exactly what
// codec.decode_add() adds. (Bits of numbers: a NaN that arithmetic makes stays a NaN, with the
// payload of the hardware that made it.) The shared arithmetic is coding/detail/codec_logic.h (the rounding formulas,
// the order of the double sums, the top-k key); the random draws are the same Philox blocks (coding/detail/rounding.h),
// and random-k's index stream is drawn on the host (Floyd's algorithm is sequential) and uploaded.
//
// Cost on the device: QSGD and TernGrad read the gradient twice (the per-segment norm or maximum,
// then the fused quantising pass that writes the streams). QSGD's Elias coding reads it three times
// (the norms, the levels, the codes) and writes and reads 12 bytes a coordinate of levels and code
// offsets (an exclusive scan), and synchronises once for the stream's length. Top-k of a segment of at least 2^20
// coordinates with k ≤ n/8 reads it once for its candidates (those at or above a threshold from a
// strided sample), then selects exactly among them; smaller segments, or a sample that misleads,
// take the full selection (three radix passes of 11, 11 and 9 bits over the magnitude, then the
// ordered select: four reads). It synchronises the stream once per segment for the full selection,
// twice for the sampled one. Scaled sign and 1-bit SGD read the gradient twice (‖v‖₁, or the sums
// of the two sides and the count of negative entries, per segment; then the signs), sign once; threshold reads it
// once to select and synchronises once for the count; random-k reads only its k entries, after
// uploading 4k bytes of indices; the casts read it once.
//
// Host API in plain C++: streams as void* (a cudaStream_t, null for the default stream), device
// buffers as raw pointers (d_ prefix). Built only when BALLOT_HAVE_CUDA; without a device the
// functions return kUnavailable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "coding/codec.h"
#include "coding/dgc.h"
#include "coding/global_topk.h"
#include "coding/sign_codecs.h"
#include "coding/wire_format.h"
#include "core/gradient_layout.h"
#include "core/result.h"
#include "core/rng.h"

namespace ballot::coding::cuda {

// Whether `codec` has a device encoder (encode()): fp32, fp16, bf16, sign, scaled_sign, onebit,
// qsgd, terngrad, topk, randomk and threshold, the plain codecs. They decode on the device too, and
// error feedback over them keeps its memory there (DeviceErrorFeedback).
bool on_device(const Codec& codec) noexcept;
// Whether DeviceStatefulCodec::create takes `codec`: error feedback over a codec of on_device() or
// over signum, signum, dgc and gtopk; with on_device(), every codec of the registry. decode_add()
// takes all of these too (their messages are their inner codec's, sign's, or the sparse format).
bool state_on_device(const Codec& codec) noexcept;

// Device scratch the codecs reuse between calls (it grows to the largest call). One per stream;
// not thread-safe. Freed with the object.
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // A device buffer of at least `bytes` for `slot` (contents undefined after growth).
  Result<void*> get(int slot, std::size_t bytes);
  // A pinned host buffer of at least `bytes` (messages come down through it at the link's speed).
  Result<void*> host(std::size_t bytes);

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

// codec.encode(gradient, layout, rng) on the device: d_gradient holds layout.total_size() floats,
// d_out (4-byte aligned, as cudaMalloc's are) has room for codec.wire_size(layout) bytes; returns
// how many were written (the wire size, except threshold's and Elias-coded QSGD's, which depend on
// the data). Asynchronous on the stream except top-k, threshold and Elias-coded QSGD (see above). kInvalidArgument for
// a codec without a device encoder (the caller encodes on the host instead) or a null buffer with d > 0.
Result<std::size_t> encode(const Codec& codec, const float* d_gradient, const GradientLayout& layout, Rng& rng,
                           std::uint8_t* d_out, Workspace& workspace, void* stream);

// encode() into a device buffer of the workspace, then the message copied into the workspace's
// pinned host buffer; synchronises the stream. The view is valid until the workspace's next call:
// the caller copies it once, into wherever the message goes (a frame, a Python bytes object).
Result<std::span<const std::uint8_t>> encode_to_host(const Codec& codec, const float* d_gradient,
                                                     const GradientLayout& layout, Rng& rng, Workspace& workspace,
                                                     void* stream);

// codec.decode_add(bytes, layout, accumulator, weight) with the accumulator on the device, for the
// codecs of on_device() (an Elias-coded QSGD stream is transcoded into planes on the host), signum
// (whose message is sign's), dgc and gtopk (top-k's format; gtopk's global message too). `bytes`
// (host memory: a peer's message) are validated on the host by the CPU decoder's checks first; a
// bad message is its Error and leaves the accumulator untouched. Then the message is copied to the
// device and added; synchronises the stream before returning (the host bytes may go).
Status decode_add(const Codec& codec, std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                  float* d_accumulator, float weight, Workspace& workspace, void* stream);

// A codec whose state lives on the device between encodes: error feedback's memory
// (DeviceErrorFeedback), Signum's momentum (DeviceSignum), DGC's momentum and accumulation
// (DeviceDgc) or global top-k's residual (DeviceGlobalTopK). The messages and the state are bit for
// bit those of the CPU codec, round after round; save_state()/load_state() write and read the CPU
// codec's state blob, so a checkpoint moves between the two. Not thread-safe.
class DeviceStatefulCodec {
 public:
  // The device twin of `codec` (state_on_device); kInvalidArgument for any other codec. Needs no
  // device until the first call.
  static Result<std::unique_ptr<DeviceStatefulCodec>> create(const Codec& codec);
  virtual ~DeviceStatefulCodec() = default;
  DeviceStatefulCodec(const DeviceStatefulCodec&) = delete;
  DeviceStatefulCodec& operator=(const DeviceStatefulCodec&) = delete;

  // d_out (8-byte aligned, as cudaMalloc's are) has room for the codec's wire_size(layout) bytes;
  // returns how many were written (as cuda::encode). The state starts at zero, and again when the
  // gradient's size changes (as on the CPU).
  virtual Result<std::size_t> encode(const float* d_gradient, const GradientLayout& layout, Rng& rng,
                                     std::uint8_t* d_out, void* stream) = 0;
  // encode() into a device buffer, then the message copied into a pinned host buffer (as
  // cuda::encode_to_host: valid until this object's next call); synchronises the stream.
  Result<std::span<const std::uint8_t>> encode_to_host(const float* d_gradient, const GradientLayout& layout, Rng& rng,
                                                       void* stream);
  // The CPU codec's state blob; synchronises the stream.
  virtual Result<std::vector<std::uint8_t>> save_state(void* stream) = 0;
  // Validates the blob (it comes from a file) against the codec and the layout, then uploads it.
  // reset_state() forgets the state (the next encode starts from zero).
  virtual Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) = 0;
  virtual void reset_state() = 0;
  // The number of floats of state on the device (0 before the first encode or after an empty state).
  virtual std::size_t size() const noexcept = 0;

 protected:
  DeviceStatefulCodec() = default;
  virtual std::size_t wire_size(const GradientLayout& layout) const = 0;
  Workspace workspace_;
};

// Error feedback (coding/error_feedback.h) with its memory on the device: p = g + e, Δ = C(p) and
// e ← p − decode(Δ), all on the device.
class DeviceErrorFeedback final : public DeviceStatefulCodec {
 public:
  // `codec` must be error feedback over a codec with a device encoder, or over signum (whose
  // momentum then lives on the device too), e.g. the registry's "topk:ratio=0.01,ef=1";
  // kInvalidArgument otherwise.
  static Result<std::unique_ptr<DeviceErrorFeedback>> create(const Codec& codec);
  ~DeviceErrorFeedback() override;

  const Codec& inner() const noexcept { return *inner_; }
  Result<std::size_t> encode(const float* d_gradient, const GradientLayout& layout, Rng& rng, std::uint8_t* d_out,
                             void* stream) override;
  Result<std::vector<std::uint8_t>> save_state(void* stream) override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) override;
  void reset_state() override;
  std::size_t size() const noexcept override { return size_; }
  // The memory e on the device (null before the first encode or after an empty state).
  const float* memory() const noexcept { return memory_; }

 private:
  explicit DeviceErrorFeedback(std::unique_ptr<Codec> inner);
  std::size_t wire_size(const GradientLayout& layout) const override { return inner_->wire_size(layout); }
  Status resize(std::size_t d, void* stream);

  std::unique_ptr<Codec> inner_;
  std::unique_ptr<DeviceStatefulCodec> inner_state_;  // the inner codec's own state (signum's momentum)
  float* memory_ = nullptr;
  float* corrected_ = nullptr;
  std::size_t size_ = 0;
};

// Signum (coding/sign_codecs.h) with its momentum on the device: m ← βm + (1 − β)g and the signs of
// m packed in one fused pass (kernels/cuda: the SignVote node's kernel); only the message's d/8
// bytes come to the host.
class DeviceSignum final : public DeviceStatefulCodec {
 public:
  // `codec` must be signum; kInvalidArgument otherwise.
  static Result<std::unique_ptr<DeviceSignum>> create(const Codec& codec);
  ~DeviceSignum() override;

  Result<std::size_t> encode(const float* d_gradient, const GradientLayout& layout, Rng& rng, std::uint8_t* d_out,
                             void* stream) override;
  Result<std::vector<std::uint8_t>> save_state(void* stream) override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) override;
  void reset_state() override;
  std::size_t size() const noexcept override { return size_; }
  const float* momentum() const noexcept { return momentum_; }

 private:
  explicit DeviceSignum(SignumOptions options) : options_(options) {}
  std::size_t wire_size(const GradientLayout& layout) const override;
  Status resize(std::size_t d, void* stream);

  SignumOptions options_;
  float* momentum_ = nullptr;
  std::size_t size_ = 0;
};

// DGC (coding/dgc.h) with u, v and the round count on the device. Per round: the segments' clipping
// factors (a reduction pass, when clip > 0), u ← m·u + f·g and v ← v + u (one fused pass), then per
// segment the selection of detail::select_by_sampled_threshold: the sample's coordinates are drawn
// on the host from the same Rng (4m bytes up, m floats of |v| gathered and brought back), the
// threshold passes run on the host (detail::sampled_threshold_passes) with each pass's candidates
// selected on the device and their count brought back (a synchronisation per pass, usually one),
// and more than k candidates, or a small segment, end in the device top-k. What is sent is zeroed in
// u and v. Only the message (8 bytes a sent entry) comes to the host.
class DeviceDgc final : public DeviceStatefulCodec {
 public:
  // `codec` must be dgc; kInvalidArgument otherwise.
  static Result<std::unique_ptr<DeviceDgc>> create(const Codec& codec);
  ~DeviceDgc() override;

  Result<std::size_t> encode(const float* d_gradient, const GradientLayout& layout, Rng& rng, std::uint8_t* d_out,
                             void* stream) override;
  Result<std::vector<std::uint8_t>> save_state(void* stream) override;
  // A blob with empty u and v sets only the round count (the next encode starts them at zero).
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) override;
  void reset_state() override;
  std::size_t size() const noexcept override { return size_; }
  std::uint64_t rounds() const noexcept { return rounds_; }

 private:
  explicit DeviceDgc(DgcOptions options) : host_(options) {}
  std::size_t wire_size(const GradientLayout& layout) const override { return host_.wire_size(layout); }
  Status resize(std::size_t d, void* stream);

  DgcCodec host_;           // the options, the density schedule and the sample counts (its own state unused)
  float* state_ = nullptr;  // u in [0, d), v in [d, 2d)
  std::size_t size_ = 0;
  std::uint64_t rounds_ = 0;
};

// Global top-k's worker side (coding/global_topk.h) with its residual on the device: r ← r + g,
// the local top-k of r sent (the device top-k) and zeroed in r; accept_global() puts back what the
// aggregator's global set did not take.
class DeviceGlobalTopK final : public DeviceStatefulCodec {
 public:
  // `codec` must be gtopk; kInvalidArgument otherwise.
  static Result<std::unique_ptr<DeviceGlobalTopK>> create(const Codec& codec);
  ~DeviceGlobalTopK() override;

  Result<std::size_t> encode(const float* d_gradient, const GradientLayout& layout, Rng& rng, std::uint8_t* d_out,
                             void* stream) override;
  // GlobalTopKCodec::accept_global: the aggregator's message (from the network) is validated on the
  // host, then the last encode's values whose index it does not hold are added back into the
  // residual. Synchronises the stream.
  Status accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout, void* stream);
  Result<std::vector<std::uint8_t>> save_state(void* stream) override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout, void* stream) override;
  void reset_state() override;
  std::size_t size() const noexcept override { return size_; }

 private:
  explicit DeviceGlobalTopK(SparseOptions options) : host_(options) {}
  std::size_t wire_size(const GradientLayout& layout) const override { return host_.wire_size(layout); }
  Status resize(std::size_t d, void* stream);

  GlobalTopKCodec host_;  // the options and the wire size (its own state unused)
  float* residual_ = nullptr;
  std::size_t size_ = 0;
  // The last local selection until accept_global(): per segment its offset and count; the indices
  // (relative to their segment) and then the values, on the device.
  std::vector<Segment> sent_segments_;
  std::vector<std::size_t> sent_counts_;
  std::uint8_t* sent_ = nullptr;
  std::size_t sent_capacity_ = 0;
};

// Host conveniences for tests and tools: copy to the device, run, copy back, synchronise.
Result<EncodedGradient> encode_on_device(const Codec& codec, std::span<const float> gradient,
                                         const GradientLayout& layout, Rng& rng);
Status decode_add_on_device(const Codec& codec, std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                            std::span<float> accumulator, float weight = 1.0f);

}  // namespace ballot::coding::cuda
