#include "transport/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

namespace ballot::transport {

namespace {

Error nccl_error(const char* what, ncclResult_t result) {
  return make_error(ErrorCode::kIo, std::string(what) + ": " + ncclGetErrorString(result));
}

Error cuda_error(const char* what, cudaError_t error) {
  return make_error(error == cudaErrorNoDevice ? ErrorCode::kUnavailable : ErrorCode::kIo,
                    std::string(what) + ": " + cudaGetErrorString(error));
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int device = 0;
};

Result<NcclUniqueId> NcclCommunicator::unique_id() {
  static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId), "NCCL_UNIQUE_ID_BYTES changed");
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return nccl_error("ncclGetUniqueId", r);
  NcclUniqueId bytes{};
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(int rank, int world_size, const NcclUniqueId& id,
                                                                   int device) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return make_error(ErrorCode::kInvalidArgument, "rank " + std::to_string(rank) + " of world size " +
                                                       std::to_string(world_size) + " is out of range");
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) return cuda_error("cudaGetDeviceCount", e);
  if (device < 0 || device >= devices)
    return make_error(ErrorCode::kUnavailable, "CUDA device " + std::to_string(device) + " does not exist (" +
                                                   std::to_string(devices) + " present)");
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  auto state = std::make_unique<State>();
  state->device = device;
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.data(), sizeof(nccl_id));
  if (const ncclResult_t r = ncclCommInitRank(&state->comm, world_size, nccl_id, rank); r != ncclSuccess)
    return nccl_error("ncclCommInitRank", r);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state), rank, world_size));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state, int rank, int world_size)
    : state_(std::move(state)), rank_(rank), world_size_(world_size) {}

NcclCommunicator::~NcclCommunicator() {
  if (state_ && state_->comm != nullptr) ncclCommDestroy(state_->comm);
}

namespace {

// A failed collective may also surface asynchronously (e.g. a peer rank died).
Status check_async(ncclComm_t comm, const char* what, ncclResult_t result) {
  if (result != ncclSuccess) return nccl_error(what, result);
  ncclResult_t async = ncclSuccess;
  if (const ncclResult_t r = ncclCommGetAsyncError(comm, &async); r != ncclSuccess)
    return nccl_error("ncclCommGetAsyncError", r);
  if (async != ncclSuccess) return nccl_error(what, async);
  return {};
}

}  // namespace

Status NcclCommunicator::allgather_signs(const std::uint64_t* d_signs, std::size_t words, std::uint64_t* d_gathered,
                                         void* stream) {
  if (words > 0 && (d_signs == nullptr || d_gathered == nullptr))
    return make_error(ErrorCode::kInvalidArgument, "allgather_signs: null buffer");
  const ncclResult_t r =
      ncclAllGather(d_signs, d_gathered, words, ncclUint64, state_->comm, static_cast<cudaStream_t>(stream));
  return check_async(state_->comm, "ncclAllGather", r);
}

Status NcclCommunicator::allreduce_counts(const std::int32_t* d_counts, std::int32_t* d_sum, std::size_t count,
                                          void* stream) {
  if (count > 0 && (d_counts == nullptr || d_sum == nullptr))
    return make_error(ErrorCode::kInvalidArgument, "allreduce_counts: null buffer");
  const ncclResult_t r =
      ncclAllReduce(d_counts, d_sum, count, ncclInt32, ncclSum, state_->comm, static_cast<cudaStream_t>(stream));
  return check_async(state_->comm, "ncclAllReduce", r);
}

}  // namespace ballot::transport
