// CUDA twins of the sign kernels: pack, unpack and bit-sliced majority vote on the GPU.
//
// Host API in plain C++ (no CUDA types): streams are passed as `void*` (a cudaStream_t, null for
// the default stream), device buffers as raw pointers (d_ prefix). Every kernel entry point
// checks its launch and returns a Status instead of throwing; it is asynchronous on the stream.
// Results are bit-identical to the CPU reference (kernels/sign_kernels.h, kernels/majority_vote.h):
// the per-element logic is shared through kernels/sign_logic.h.
// Built only when BALLOT_HAVE_CUDA; the functions report ErrorCode::kUnavailable when no device
// is present, so callers and tests can skip cleanly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/bit_vector.h"
#include "core/result.h"
#include "kernels/momentum.h"
#include "kernels/update_logic.h"

namespace ballot::kernels::cuda {

// Number of usable CUDA devices; 0 (never an error) when there is no GPU or no driver.
int device_count() noexcept;
// The calling thread's current CUDA device (where these functions allocate and launch), or −1.
int current_device() noexcept;
// OK when a device is present; kUnavailable "no CUDA device present" otherwise. For every CUDA module.
Status require_device();

// A CUDA runtime result (a cudaError_t as int) as a Status: success, kUnavailable for no device or
// no driver, kInternal otherwise; the message is `what` and CUDA's text. For every CUDA module.
Status cuda_status(int code, const char* what);

// d_words receives words_for(count) words, padding bits zero. Warp ballot: each warp packs 64
// consecutive values into one word.
Status pack_signs(const float* d_values, std::size_t count, std::uint64_t* d_words, void* stream);

// d_out[i] = bit i ? positive : negative.
Status unpack_signs(const std::uint64_t* d_words, std::size_t count, float negative, float positive, float* d_out,
                    void* stream);

// Inputs are `num_inputs` rows of `num_words` words, row i at d_inputs + i * num_words; d_weights
// may be null (all 1). One thread per output word keeps bit-sliced counters in registers.
// `total_weight` = num_inputs without weights, else the sum of the weights (< 2^32).
Status majority_vote(const std::uint64_t* d_inputs, std::size_t num_inputs, std::size_t num_words,
                     const std::uint32_t* d_weights, std::uint64_t total_weight, std::uint64_t* d_out, void* stream);

// The node's hot path, bit-identical to the CPU (kernels/update_logic.h):
// Signum's momentum fused with the sign pack: d_momentum ← β·m + (1−β)·g, then d_words = the
// signs of the new momentum (kernels::signum_momentum followed by kernels::pack_signs).
Status momentum_pack_signs(float* d_momentum, const float* d_gradient, std::size_t count, MomentumFactors factors,
                           std::uint64_t* d_words, void* stream);
// An update rule from a decision (learning/optimizer.h): the direction is the packed vote d_vote
// (bit 1 → +1, 0 → −1) or the fp32 d_direction — exactly one of them non-null (else
// kInvalidArgument). With factors.momentum == 0 it is the sign rule / plain SGD,
// x ← x − η(v + λx), and d_buffer is unused; otherwise SGD with momentum (heavy ball on a vote)
// over the momentum buffer d_buffer (count floats), which starts as the decayed direction when
// first_step.
Status apply_update(float* d_params, const std::uint64_t* d_vote, const float* d_direction, float* d_buffer,
                    std::size_t count, const SgdFactors& factors, bool first_step, void* stream);

// Words first … first + count − 1 of the random stream Rng(seed, stream) (core/rng.h), one
// thread per word: the GPU draws exactly the numbers the CPU does.
Status philox_words(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count,
                    std::uint32_t* d_out, void* cuda_stream);

// Host convenience: copy to the device, run, copy back, synchronise. For tests and small tools.
Result<std::vector<std::uint32_t>> philox_words_on_device(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                                          std::size_t count);
Result<BitVector> pack_signs_on_device(std::span<const float> values);
Result<std::vector<float>> unpack_signs_on_device(const BitVector& signs, float scale);
// momentum is updated in place; returns the signs of the new momentum.
Result<BitVector> momentum_pack_signs_on_device(std::span<float> momentum, std::span<const float> gradient,
                                                MomentumFactors factors);
// params (and buffer, when factors.momentum != 0) updated in place from the vote or direction
// (one of them non-empty, of params' size).
Status apply_update_on_device(std::span<float> params, const BitVector* vote, std::span<const float> direction,
                              std::span<float> buffer, const SgdFactors& factors, bool first_step);
Result<BitVector> majority_vote_on_device(std::span<const BitVector> inputs,
                                          std::span<const std::uint32_t> weights = {});

}  // namespace ballot::kernels::cuda
