// Internal: C-linkage launchers of the CUDA kernels, with plain types only. launch.cu is compiled
// by nvcc, whose implicit CUDA headers declare a global function `ballot` that collides with our
// namespace; keeping the nvcc unit behind this C interface keeps namespace ballot out of it.
// Each returns a cudaError_t as int (0 = success) from the launch check.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
int ballot_cuda_launch_pack(const float* d_values, std::size_t count, std::uint64_t* d_words, void* stream);
int ballot_cuda_launch_unpack(const std::uint64_t* d_words, std::size_t count, float negative, float positive,
                              float* d_out, void* stream);
int ballot_cuda_launch_philox(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count,
                              std::uint32_t* d_out, void* stream_handle);
int ballot_cuda_launch_vote(const std::uint64_t* d_inputs, std::size_t num_inputs, std::size_t num_words,
                            const std::uint32_t* d_weights, std::uint64_t total_weight, std::uint64_t* d_out,
                            void* stream);
int ballot_cuda_launch_momentum_pack(float* d_momentum, const float* d_gradient, std::size_t count, float keep,
                                     float mix, std::uint64_t* d_words, void* stream);
// d_vote or d_direction (the other null); d_buffer null without momentum.
int ballot_cuda_launch_update(float* d_params, const std::uint64_t* d_vote, const float* d_direction, float* d_buffer,
                              std::size_t count, float lr, float weight_decay, float momentum, float keep, int nesterov,
                              int first_step, void* stream);
}
