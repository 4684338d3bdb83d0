// Host side of the CUDA kernels (compiled by the host compiler; see launch.h).
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/detail/device_buffer.h"
#include "kernels/cuda/detail/launch.h"

namespace ballot::kernels::cuda {
namespace {

using detail::DeviceBuffer;

}  // namespace

Status require_device() {
  if (device_count() == 0) return make_error(ErrorCode::kUnavailable, "no CUDA device present");
  return {};
}

Status cuda_status(int code, const char* what) {
  const auto error = static_cast<cudaError_t>(code);
  if (error == cudaSuccess) return {};
  const ErrorCode kind = (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) ? ErrorCode::kUnavailable
                                                                                              : ErrorCode::kInternal;
  return make_error(kind, std::string(what) + ": " + cudaGetErrorString(error));
}

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a missing driver/device
    return 0;
  }
  return count;
}

int current_device() noexcept {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

Status pack_signs(const float* d_values, std::size_t count, std::uint64_t* d_words, void* stream) {
  return cuda_status(static_cast<cudaError_t>(ballot_cuda_launch_pack(d_values, count, d_words, stream)),
                     "pack kernel launch");
}

Status unpack_signs(const std::uint64_t* d_words, std::size_t count, float negative, float positive, float* d_out,
                    void* stream) {
  return cuda_status(
      static_cast<cudaError_t>(ballot_cuda_launch_unpack(d_words, count, negative, positive, d_out, stream)),
      "unpack kernel launch");
}

Status majority_vote(const std::uint64_t* d_inputs, std::size_t num_inputs, std::size_t num_words,
                     const std::uint32_t* d_weights, std::uint64_t total_weight, std::uint64_t* d_out, void* stream) {
  if (total_weight >= (std::uint64_t{1} << 32)) {
    return make_error(ErrorCode::kInvalidArgument, "total vote weight must be below 2^32");
  }
  return cuda_status(static_cast<cudaError_t>(ballot_cuda_launch_vote(d_inputs, num_inputs, num_words, d_weights,
                                                                      total_weight, d_out, stream)),
                     "vote kernel launch");
}

Status momentum_pack_signs(float* d_momentum, const float* d_gradient, std::size_t count, MomentumFactors factors,
                           std::uint64_t* d_words, void* stream) {
  return cuda_status(static_cast<cudaError_t>(ballot_cuda_launch_momentum_pack(
                         d_momentum, d_gradient, count, factors.keep, factors.mix, d_words, stream)),
                     "momentum pack kernel launch");
}

Status apply_update(float* d_params, const std::uint64_t* d_vote, const float* d_direction, float* d_buffer,
                    std::size_t count, const SgdFactors& factors, bool first_step, void* stream) {
  if (count == 0) return {};  // nothing to update (an empty tensor's data pointer may be null)
  if ((d_vote == nullptr) == (d_direction == nullptr)) {
    return make_error(ErrorCode::kInvalidArgument, "an update needs exactly one of a vote and an fp32 direction");
  }
  if (factors.momentum != 0.0f && d_buffer == nullptr && count != 0) {
    return make_error(ErrorCode::kInvalidArgument, "an update with momentum needs its buffer");
  }
  return cuda_status(
      static_cast<cudaError_t>(ballot_cuda_launch_update(
          d_params, d_vote, d_direction, factors.momentum != 0.0f ? d_buffer : nullptr, count, factors.lr,
          factors.weight_decay, factors.momentum, factors.keep, factors.nesterov ? 1 : 0, first_step ? 1 : 0, stream)),
      "update kernel launch");
}

Status philox_words(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count,
                    std::uint32_t* d_out, void* cuda_stream) {
  return cuda_status(
      static_cast<cudaError_t>(ballot_cuda_launch_philox(seed, stream, first, count, d_out, cuda_stream)),
      "philox kernel launch");
}

Result<std::vector<std::uint32_t>> philox_words_on_device(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                                          std::size_t count) {
  BALLOT_TRY(require_device());
  std::vector<std::uint32_t> out(count);
  DeviceBuffer<std::uint32_t> d_out(count);
  BALLOT_TRY(d_out.status());
  BALLOT_TRY(philox_words(seed, stream, first, count, d_out.get(), nullptr));
  BALLOT_TRY(d_out.download(out.data()));
  return out;
}

Result<BitVector> pack_signs_on_device(std::span<const float> values) {
  BALLOT_TRY(require_device());
  BitVector out(values.size());
  DeviceBuffer<float> d_values(values.size());
  DeviceBuffer<std::uint64_t> d_words(out.num_words());
  BALLOT_TRY(d_values.status());
  BALLOT_TRY(d_words.status());
  BALLOT_TRY(d_values.upload(values.data()));
  BALLOT_TRY(pack_signs(d_values.get(), values.size(), d_words.get(), nullptr));
  BALLOT_TRY(d_words.download(out.data()));
  return out;
}

Result<std::vector<float>> unpack_signs_on_device(const BitVector& signs, float scale) {
  BALLOT_TRY(require_device());
  std::vector<float> out(signs.size());
  DeviceBuffer<std::uint64_t> d_words(signs.num_words());
  DeviceBuffer<float> d_out(signs.size());
  BALLOT_TRY(d_words.status());
  BALLOT_TRY(d_out.status());
  BALLOT_TRY(d_words.upload(signs.data()));
  BALLOT_TRY(unpack_signs(d_words.get(), signs.size(), -scale, scale, d_out.get(), nullptr));
  BALLOT_TRY(d_out.download(out.data()));
  return out;
}

Result<BitVector> momentum_pack_signs_on_device(std::span<float> momentum, std::span<const float> gradient,
                                                MomentumFactors factors) {
  BALLOT_TRY(require_device());
  if (momentum.size() != gradient.size()) {
    return make_error(ErrorCode::kInvalidArgument, "momentum and gradient sizes differ");
  }
  BitVector out(momentum.size());
  DeviceBuffer<float> d_momentum(momentum.size()), d_gradient(gradient.size());
  DeviceBuffer<std::uint64_t> d_words(out.num_words());
  BALLOT_TRY(d_momentum.status());
  BALLOT_TRY(d_gradient.status());
  BALLOT_TRY(d_words.status());
  BALLOT_TRY(d_momentum.upload(momentum.data()));
  BALLOT_TRY(d_gradient.upload(gradient.data()));
  BALLOT_TRY(momentum_pack_signs(d_momentum.get(), d_gradient.get(), momentum.size(), factors, d_words.get(), nullptr));
  BALLOT_TRY(d_momentum.download(momentum.data()));
  BALLOT_TRY(d_words.download(out.data()));
  return out;
}

Status apply_update_on_device(std::span<float> params, const BitVector* vote, std::span<const float> direction,
                              std::span<float> buffer, const SgdFactors& factors, bool first_step) {
  BALLOT_TRY(require_device());
  const std::size_t d = params.size();
  if ((vote != nullptr && vote->size() != d) || (vote == nullptr && direction.size() != d) ||
      (factors.momentum != 0.0f && buffer.size() != d)) {
    return make_error(ErrorCode::kInvalidArgument, "update sizes differ");
  }
  DeviceBuffer<float> d_params(d), d_direction(vote == nullptr ? d : 0), d_buffer(buffer.size());
  DeviceBuffer<std::uint64_t> d_vote(vote != nullptr ? vote->num_words() : 0);
  BALLOT_TRY(d_params.status());
  BALLOT_TRY(d_direction.status());
  BALLOT_TRY(d_buffer.status());
  BALLOT_TRY(d_vote.status());
  BALLOT_TRY(d_params.upload(params.data()));
  if (vote != nullptr) {
    BALLOT_TRY(d_vote.upload(vote->data()));
  } else {
    BALLOT_TRY(d_direction.upload(direction.data()));
  }
  if (!buffer.empty()) BALLOT_TRY(d_buffer.upload(buffer.data()));
  BALLOT_TRY(apply_update(d_params.get(), vote != nullptr ? d_vote.get() : nullptr,
                          vote == nullptr ? d_direction.get() : nullptr, buffer.empty() ? nullptr : d_buffer.get(), d,
                          factors, first_step, nullptr));
  BALLOT_TRY(d_params.download(params.data()));
  if (!buffer.empty()) BALLOT_TRY(d_buffer.download(buffer.data()));
  return {};
}

Result<BitVector> majority_vote_on_device(std::span<const BitVector> inputs, std::span<const std::uint32_t> weights) {
  BALLOT_TRY(require_device());
  if (inputs.empty()) return make_error(ErrorCode::kInvalidArgument, "no inputs to vote on");
  if (!weights.empty() && weights.size() != inputs.size()) {
    return make_error(ErrorCode::kInvalidArgument, "one weight per input is needed");
  }
  const std::size_t size = inputs.front().size(), num_words = inputs.front().num_words();
  std::vector<std::uint64_t> packed(inputs.size() * num_words);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != size) return make_error(ErrorCode::kInvalidArgument, "input sizes differ");
    std::copy(inputs[i].words().begin(), inputs[i].words().end(), packed.begin() + i * num_words);
  }
  std::uint64_t total = weights.empty() ? inputs.size() : 0;
  for (auto weight : weights) total += weight;
  DeviceBuffer<std::uint64_t> d_inputs(packed.size()), d_out(num_words);
  DeviceBuffer<std::uint32_t> d_weights(weights.size());
  BALLOT_TRY(d_inputs.status());
  BALLOT_TRY(d_out.status());
  BALLOT_TRY(d_weights.status());
  BALLOT_TRY(d_inputs.upload(packed.data()));
  if (!weights.empty()) BALLOT_TRY(d_weights.upload(weights.data()));
  BALLOT_TRY(majority_vote(d_inputs.get(), inputs.size(), num_words, weights.empty() ? nullptr : d_weights.get(), total,
                           d_out.get(), nullptr));
  BitVector out(size);
  BALLOT_TRY(d_out.download(out.data()));
  out.clear_padding();
  return out;
}

}  // namespace ballot::kernels::cuda
