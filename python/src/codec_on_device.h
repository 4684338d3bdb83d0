// The device side of one codec, for gradients that lie in GPU memory (coding/cuda): the bytes the
// codec would write on the host, encoded where the gradient is, with the codec's state (error
// feedback's memory, Signum's momentum, DGC's momentum and accumulation, global top-k's residual)
// kept on that GPU between encodes. The codec itself (not owned) stays the state of record:
// sync_host() writes the device's memory back into it before anyone saves it or encodes on the host, and forget() makes
// the next device encode start again from the codec's state after that changed (a load, a reset). Shared by
// ballot.codecs.Codec and the node session (ballot.torch's gradient path). Not thread-safe: its owner serialises the
// calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "coding/codec.h"
#include "core/gradient_layout.h"
#include "core/result.h"
#include "core/rng.h"

namespace ballot::python {

class CodecOnDevice {
 public:
  explicit CodecOnDevice(coding::Codec& codec);
  ~CodecOnDevice();
  CodecOnDevice(const CodecOnDevice&) = delete;
  CodecOnDevice& operator=(const CodecOnDevice&) = delete;

  // Whether this build encodes `codec` on a GPU: every codec of the registry (coding/cuda:
  // on_device or state_on_device); false in a build without CUDA.
  static bool supports(const coding::Codec& codec) noexcept;
  // The error for a codec that !supports(): kInvalidArgument, naming the codecs that have an encoder.
  static Error unsupported(const coding::Codec& codec);

  // codec.encode(gradient, layout, rng) for `d_gradient`, layout.total_size() floats on CUDA device
  // `device_id` (the current device, and the same one every call: the memory lives there), queued on
  // `stream` after the caller's work; the message comes to the host (the stream is synchronised)
  // into a pinned buffer of this object: the view is valid until its next call, and the caller
  // copies it once, into the message's final place. kInvalidArgument for a codec without a device
  // encoder, another device, or a build without CUDA.
  Result<std::span<const std::uint8_t>> encode(const float* d_gradient, int device_id, const GradientLayout& layout,
                                               Rng& rng, void* stream);
  // Global top-k: the aggregator's global message for the last encode (GlobalTopKCodec::accept_global),
  // taken where that encode's selection is: on the device after a device encode (queued on `stream`,
  // which is synchronised; a sync_host() in between does not move the selection, and the device
  // holds the newer state afterwards), else by the codec on the host. kInvalidArgument for another codec.
  Status accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout, void* stream);
  // Global top-k: forgets the last encode's selection, on the device and on the host
  // (GlobalTopKCodec::drop_selection). Nothing for other codecs.
  void drop_selection() noexcept;
  // The codec's state back into the codec, if the device holds a newer one.
  Status sync_host();
  // The codec's state changed on the host (a load, a reset, a host encode): the next device encode
  // starts from it.
  void forget() noexcept {
    device_current_ = false;
    selection_on_device_ = false;
  }

 private:
  struct OnGpu;  // the encoder's workspace and the codec's state there (a build with CUDA)
  coding::Codec* codec_;
  std::unique_ptr<OnGpu> gpu_;
  int home_device_ = -1;
  bool device_current_ = false;       // the codec's state lives on the device
  std::size_t state_size_ = 0;        // the size of the last gradient encoded on the device
  bool selection_on_device_ = false;  // global top-k: the last encode's selection waits on the device
};

}  // namespace ballot::python
