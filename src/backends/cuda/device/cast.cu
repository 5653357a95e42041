// The cast kernel of mixed precision: the fp16/bf16 copies of the f32 master weights and
// images each step, and the gradients' way back to f32. Bandwidth-bound: one read, one write.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/cast.h"
#include "backends/cuda/device/common.cuh"

namespace trident::cuda::device {

namespace {

template <class From, class To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) y[i] = from_float<To>(to_float(x[i]));
}

}  // namespace

void launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(from, [&](auto f) {
    dispatch_elem(to, [&](auto t) {
      using F = decltype(f);
      using T = decltype(t);
      cast_kernel<F, T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const F*>(x), static_cast<T*>(y), n);
    });
  });
  check_launch("cast_kernel");
}

}  // namespace trident::cuda::device
