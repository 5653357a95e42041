// Device-side helpers shared by the element-wise, pooling, batchnorm, loss and optimizer
// kernels of the cuda backend: conversions between the storage dtypes (f32, f16, bf16) and
// the f32 arithmetic every kernel computes in, grid-stride loop bounds in 64-bit indices,
// and a deterministic block reduction. Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// Storage type → f32 and back (round to nearest even, as the host's core/half.h does).
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Two f32 values rounded to a 16-bit storage type T and packed into one word, `lo` in the low
// half (as in memory): one conversion instruction for the pair. widen_pair is its inverse.
template <class T>
__device__ __forceinline__ unsigned pack_rounded(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  }
}
template <class T>
__device__ __forceinline__ float2 widen_pair(unsigned w) {
  if constexpr (std::is_same_v<T, __half>) return __half22float2(*reinterpret_cast<const __half2*>(&w));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
}

// to_float(from_float<T>(v)) > 0 without the round trip: v rounds to a positive T exactly when
// it exceeds half of T's smallest positive subnormal (the midpoint rounds to the even zero).
template <class T>
__device__ __forceinline__ bool rounds_positive(float v) {
  if constexpr (std::is_same_v<T, __half>) return v > 0x1p-25f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return v > 0x1p-134f;
  else return v > 0.f;
}

// Per-channel tensors (BN parameters and statistics, the loss seed) are small and read once
// per thread, so their dtype is a run-time value rather than a template parameter.
__device__ __forceinline__ float load_as_float(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_from_float(void* p, ElemType t, int64_t i, float v) {
  switch (t) {
    case ElemType::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case ElemType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// First index and stride of a 1-D grid-stride loop, in 64-bit arithmetic.
__device__ __forceinline__ int64_t grid_start() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Sum of `v` over the block (blockDim.x a power of two ≤ 1024), in a fixed tree order so the
// result is the same on every run. `scratch` holds blockDim.x values; every thread gets the sum.
template <class A>
__device__ A block_sum(A v, A* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const A total = scratch[0];
  __syncthreads();
  return total;
}

// Maximum of `v` over the block, same contract as block_sum.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    __syncthreads();
  }
  const float m = scratch[0];
  __syncthreads();
  return m;
}

// Calls fn(T{}) with T the storage type of `t` (host side, to pick a kernel instantiation).
template <class Fn>
void dispatch_elem(ElemType t, Fn&& fn) {
  switch (t) {
    case ElemType::f16: fn(__half{}); return;
    case ElemType::bf16: fn(__nv_bfloat16{}); return;
    default: fn(float{}); return;
  }
}

}  // namespace trident::cuda::device
