#include "python/src/codec_on_device.h"

#include <string>

#include "coding/dgc.h"
#include "coding/error_feedback.h"
#include "coding/global_topk.h"
#include "coding/sign_codecs.h"
#include "core/config.h"
#include "python/src/native.h"
#if BALLOT_HAVE_CUDA
#include "coding/cuda/codecs_cuda.h"
#endif

namespace ballot::python {

#if BALLOT_HAVE_CUDA
struct CodecOnDevice::OnGpu {
  coding::cuda::Workspace workspace;
  std::unique_ptr<coding::cuda::DeviceStatefulCodec> stateful;  // the codec's state, while it lives on the device
};
#else
struct CodecOnDevice::OnGpu {};
#endif

CodecOnDevice::CodecOnDevice(coding::Codec& codec) : codec_(&codec) {}
CodecOnDevice::~CodecOnDevice() = default;

Error CodecOnDevice::unsupported(const coding::Codec& codec) {
  return make_error(ErrorCode::kInvalidArgument, "codec " + codec.spec() + " has no CUDA encoder: pass a CPU array");
}

#if BALLOT_HAVE_CUDA

namespace {
// The size of the codec's state on the host (error feedback's memory, Signum's momentum, DGC's
// accumulation, global top-k's residual): a device encode starts from it when it is the gradient's
// size, from zero otherwise (as the CPU codecs).
std::size_t host_state_size(const coding::Codec& codec) {
  if (const auto* feedback = dynamic_cast<const coding::ErrorFeedback*>(&codec)) return feedback->memory().size();
  if (const auto* dgc = dynamic_cast<const coding::DgcCodec*>(&codec)) return dgc->velocity().size();
  if (const auto* gtopk = dynamic_cast<const coding::GlobalTopKCodec*>(&codec)) return gtopk->residual().size();
  return dynamic_cast<const coding::SignumCodec&>(codec).momentum().size();
}
}  // namespace

bool CodecOnDevice::supports(const coding::Codec& codec) noexcept {
  return coding::cuda::on_device(codec) || coding::cuda::state_on_device(codec);
}

Result<std::span<const std::uint8_t>> CodecOnDevice::encode(const float* d_gradient, int device_id,
                                                            const GradientLayout& layout, Rng& rng, void* stream) {
  if (!supports(*codec_)) return unsupported(*codec_);
  BALLOT_TRY(require_current_device(device_id));
  if (home_device_ < 0) home_device_ = device_id;
  if (home_device_ != device_id) {
    return make_error(ErrorCode::kInvalidArgument,
                      "this codec keeps its GPU state on cuda:" + std::to_string(home_device_) +
                          "; a tensor on cuda:" + std::to_string(device_id) + " needs another codec");
  }
  if (!gpu_) gpu_ = std::make_unique<OnGpu>();
  if (!codec_->stateful()) {
    return coding::cuda::encode_to_host(*codec_, d_gradient, layout, rng, gpu_->workspace, stream);
  }
  if (!gpu_->stateful) {
    BALLOT_ASSIGN_OR_RETURN(gpu_->stateful, coding::cuda::DeviceStatefulCodec::create(*codec_));
  }
  if (!device_current_) {
    // The state moves to the device (a state of this size, or an empty one: the blob is valid for
    // the layout); a state of another size restarts at zero, as on the CPU.
    const auto* dgc = dynamic_cast<const coding::DgcCodec*>(codec_);
    const std::size_t held = host_state_size(*codec_);
    if (held == layout.total_size() || held == 0) {
      BALLOT_TRY(gpu_->stateful->load_state(codec_->save_state(), layout, stream));
    } else if (dgc != nullptr) {  // u and v restart at zero, DGC's round count (its warm-up) goes on
      BALLOT_TRY(gpu_->stateful->load_state(coding::DgcCodec::state_blob({}, {}, dgc->rounds()), layout, stream));
    } else {
      gpu_->stateful->reset_state();
    }
    device_current_ = true;
  }
  state_size_ = layout.total_size();
  auto encoded = gpu_->stateful->encode_to_host(d_gradient, layout, rng, stream);
  // A new selection, or none after a failed encode (the twin forgets its last one first, as the CPU).
  selection_on_device_ = encoded.ok() && dynamic_cast<const coding::GlobalTopKCodec*>(codec_) != nullptr;
  return encoded;
}

// Each device encode synchronised its stream, so the memory is final; the copy needs no stream.
Status CodecOnDevice::sync_host() {
  if (!device_current_) return {};
  BALLOT_ASSIGN_OR_RETURN(const auto state, gpu_->stateful->save_state(nullptr));
  // Each part of the state is of the last gradient's size, or empty.
  BALLOT_TRY(codec_->load_state(state, GradientLayout::whole(state_size_)));
  device_current_ = false;
  return {};
}

#else

bool CodecOnDevice::supports(const coding::Codec&) noexcept { return false; }

Result<std::span<const std::uint8_t>> CodecOnDevice::encode(const float*, int, const GradientLayout&, Rng&, void*) {
  return make_error(ErrorCode::kInvalidArgument,
                    "CUDA arrays need a Ballot built with CUDA (this build has no CUDA kernels)");
}

Status CodecOnDevice::sync_host() { return {}; }

#endif

Status CodecOnDevice::accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout,
                                    [[maybe_unused]] void* stream) {
  auto* host = dynamic_cast<coding::GlobalTopKCodec*>(codec_);
  if (host == nullptr) {
    return make_error(ErrorCode::kInvalidArgument,
                      "accept_global is for gtopk (global top-k); this codec is " + codec_->spec());
  }
#if BALLOT_HAVE_CUDA
  if (selection_on_device_) {
    // The twin's residual is the newest state: either still current, or equal to what sync_host()
    // copied to the host since (a change on the host would have called forget()).
    BALLOT_TRY(static_cast<coding::cuda::DeviceGlobalTopK&>(*gpu_->stateful).accept_global(global, layout, stream));
    selection_on_device_ = false;
    device_current_ = true;
    return {};
  }
#endif
  return host->accept_global(global, layout);
}

void CodecOnDevice::drop_selection() noexcept {
  selection_on_device_ = false;
  if (auto* host = dynamic_cast<coding::GlobalTopKCodec*>(codec_)) host->drop_selection();
}

}  // namespace ballot::python
