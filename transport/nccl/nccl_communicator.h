// NcclCommunicator: allgather / allreduce of packed signs among the GPUs of one machine, over NCCL.
//
// TRUSTED ONLY. NCCL authenticates nothing and encrypts nothing: any process holding the unique
// id can join, and a faulty rank corrupts results silently. Use it only among co-located GPUs
// under one operator that together act as ONE node of the cluster; that node talks to the rest
// of the cluster through the authenticated transport (transport/transport.h). See
// docs/security.md.
//
// Typical use: rank 0 calls unique_id() and hands the 128 bytes to the other local processes
// (e.g. through a pipe or the launcher); every rank calls create(); then each round
// allgather_signs() gathers every GPU's packed sign vector (the majority is then taken with the
// bit-sliced vote of kernels/), or allreduce_counts() sums per-coordinate vote counts.
//
// Buffers are device pointers; `stream` is a cudaStream_t (nullptr: the default stream). Calls
// are asynchronous on the stream, like NCCL's; errors of NCCL or CUDA become Result errors
// (kIo, or kUnavailable when no device exists). Thread-safety: one communicator per thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/result.h"

namespace ballot::transport {

using NcclUniqueId = std::array<std::uint8_t, 128>;  // NCCL_UNIQUE_ID_BYTES

class NcclCommunicator {
 public:
  // A fresh id for a new communicator (call on one rank, share with the others).
  static Result<NcclUniqueId> unique_id();
  // Joins the communicator as `rank` of `world_size` on CUDA device `device`; blocks until every
  // rank has joined (NCCL semantics).
  static Result<std::unique_ptr<NcclCommunicator>> create(int rank, int world_size, const NcclUniqueId& id, int device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // d_gathered[r * words + w] = word w of rank r's d_signs. d_gathered holds world_size * words.
  Status allgather_signs(const std::uint64_t* d_signs, std::size_t words, std::uint64_t* d_gathered, void* stream);
  // d_sum[i] = sum over ranks of d_counts[i] (vote counts; exact in int32 for any world size).
  Status allreduce_counts(const std::int32_t* d_counts, std::int32_t* d_sum, std::size_t count, void* stream);

  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return world_size_; }

 private:
  struct State;
  NcclCommunicator(std::unique_ptr<State> state, int rank, int world_size);
  std::unique_ptr<State> state_;
  int rank_;
  int world_size_;
};

}  // namespace ballot::transport
