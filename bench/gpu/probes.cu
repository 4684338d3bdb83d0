// The bandwidth probes the GPU benchmarks compare with (C interface: see kernels/cuda/detail/launch.h).
#include <cuda_runtime.h>

#include <cstddef>

namespace {

// Reads every float4 once (grid-stride, 4 loads in flight per thread) and writes one float per
// thread, so nothing is optimised away: the device's read bandwidth.
__global__ void read_kernel(const float4* data, std::size_t count, float* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const float4 a = data[i], b = data[i + stride], c = data[i + 2 * stride], d = data[i + 3 * stride];
    sum += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w)) + ((c.x + c.y) + (c.z + c.w)) +
           ((d.x + d.y) + (d.z + d.w));
  }
  for (; i < count; i += stride) sum += (data[i].x + data[i].y) + (data[i].z + data[i].w);
  sink[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = sum;
}

}  // namespace

// `blocks` blocks of 256 threads; sink holds 256 · blocks floats; bytes a multiple of 16.
extern "C" int ballot_bench_launch_read(const void* data, std::size_t bytes, float* sink, unsigned blocks,
                                        void* stream) {
  read_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const float4*>(data), bytes / 16,
                                                                     sink);
  return cudaGetLastError();
}
