// Internal: an owning device buffer for the host code of the CUDA modules (kernels/cuda,
// coding/cuda, robust/cuda): their host conveniences and scratch space. Includes the CUDA runtime
// API, so only their .cc files include it, never a public header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/result.h"
#include "kernels/cuda/cuda_kernels.h"

namespace ballot::kernels::cuda::detail {

// `count` elements of T on the current device (at least one byte is allocated, so get() is never
// null). A failed allocation is in status(); the other calls then fail too.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    status_ = cuda_status(cudaMalloc(&pointer_, (count == 0 ? 1 : count) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (pointer_) cudaFree(pointer_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  const Status& status() const { return status_; }
  T* get() const { return static_cast<T*>(pointer_); }
  std::size_t size() const { return count_; }
  // Synchronous copies: the whole buffer, or `count` elements at `offset`.
  Status upload(const T* host) { return upload(host, 0, count_); }
  Status upload(const T* host, std::size_t offset, std::size_t count) {
    return cuda_status(cudaMemcpy(get() + offset, host, count * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  Status download(T* host) const {
    return cuda_status(cudaMemcpy(host, pointer_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
  }

 private:
  void* pointer_ = nullptr;
  std::size_t count_;
  Status status_;
};

// `count` elements of T from the stream-ordered allocator (cudaMallocAsync), given back with
// cudaFreeAsync on the same stream: neither call waits for the device (cudaFree would wait for
// every stream), so scratch space in a call on a caller's stream costs no synchronisation. On a
// device without memory pools (cudaDevAttrMemoryPoolsSupported 0: some virtualised GPUs) it is
// cudaMalloc and cudaFree instead.
template <typename T>
class StreamBuffer {
 public:
  StreamBuffer(std::size_t count, cudaStream_t stream) : stream_(stream) {
    const std::size_t bytes = (count == 0 ? 1 : count) * sizeof(T);
    int device = 0, pools = 0;
    pooled_ = cudaGetDevice(&device) == cudaSuccess &&
              cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess && pools != 0;
    status_ = pooled_ ? cuda_status(cudaMallocAsync(&pointer_, bytes, stream), "cudaMallocAsync")
                      : cuda_status(cudaMalloc(&pointer_, bytes), "cudaMalloc");
  }
  ~StreamBuffer() {
    if (!pointer_) return;
    if (pooled_) {
      cudaFreeAsync(pointer_, stream_);
    } else {
      cudaFree(pointer_);
    }
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;

  const Status& status() const { return status_; }
  T* get() const { return static_cast<T*>(pointer_); }

 private:
  void* pointer_ = nullptr;
  cudaStream_t stream_;
  bool pooled_ = false;
  Status status_;
};

}  // namespace ballot::kernels::cuda::detail
