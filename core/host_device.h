// BALLOT_HOST_DEVICE marks small inline functions shared by the CPU code and the CUDA kernels, so
// that the CPU version defines the answer the GPU must reproduce bit for bit.
#pragma once

#if defined(__CUDACC__)
#define BALLOT_HOST_DEVICE __host__ __device__
#else
#define BALLOT_HOST_DEVICE
#endif
