// TRIDENT_HOST_DEVICE marks the functions written once for the host and the GPU (the ops'
// *_math.h headers): __host__ __device__ under nvcc, nothing for the host compiler.
#pragma once

#if defined(__CUDACC__)
#define TRIDENT_HOST_DEVICE __host__ __device__
#else
#define TRIDENT_HOST_DEVICE
#endif
