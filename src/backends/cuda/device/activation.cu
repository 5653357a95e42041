// The activations (ops/activation_math.h: the same formulas as the reference backend, in f32
// for every storage type) over the map kernel of vector.cuh, and squeeze-excitation's
// per-sample gate and its operand gradient. The gate's tensors are small (N·C values), so
// mul_reduce is one thread per output value summing its rows in order, which is also
// deterministic.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/activation.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

namespace {

template <class T>
struct ActivationOf {
  ops::ActivationParams p;
  __device__ __forceinline__ T operator()(T x) const { return from_float<T>(ops::activation_forward(p, to_float(x))); }
};

template <class T>
struct ActivationGradient {
  ops::ActivationParams p;
  __device__ __forceinline__ T operator()(T x, T dy) const {
    return from_float<T>(ops::activation_backward(p, to_float(x), to_float(dy)));
  }
};

template <class T>
__global__ void mul_per_sample_kernel(const T* a, const T* b, T* y, int64_t n, int64_t channels,
                                      int64_t rows_per_sample) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t r = i / channels, k = i - r * channels;
    y[i] = from_float<T>(__fmul_rn(to_float(a[i]), to_float(b[(r / rows_per_sample) * channels + k])));
  }
}

template <class T>
__global__ void mul_reduce_kernel(const T* a, const T* dy, T* db, int64_t channels, int64_t groups, int64_t per) {
  for (int64_t o = grid_start(); o < groups * channels; o += grid_stride()) {
    const int64_t s = o / channels, k = o - s * channels;
    float acc = 0.f;
    for (int64_t r = s * per; r < (s + 1) * per; ++r)
      acc = __fadd_rn(acc, __fmul_rn(to_float(a[r * channels + k]), to_float(dy[r * channels + k])));
    db[o] = from_float<T>(acc);
  }
}

}  // namespace

void launch_activation(ElemType t, const ops::ActivationParams& p, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_unary<T>(x, y, n, ActivationOf<T>{p}, stream);
  });
  check_launch("activation_kernel");
}

void launch_activation_backward(ElemType t, const ops::ActivationParams& p, const void* x, const void* dy, void* dx,
                                int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T>(x, dy, dx, n, ActivationGradient<T>{p}, stream);
  });
  check_launch("activation_backward_kernel");
}

void launch_mul_per_sample(ElemType t, const void* a, const void* b, void* y, int64_t rows, int64_t channels,
                           int64_t rows_per_sample, cudaStream_t stream) {
  const int64_t n = rows * channels;
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    mul_per_sample_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n, channels, rows_per_sample);
  });
  check_launch("mul_per_sample_kernel");
}

void launch_mul_reduce(ElemType t, const void* a, const void* dy, void* db, int64_t rows, int64_t channels,
                       int64_t groups, cudaStream_t stream) {
  if (groups <= 0 || channels <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    mul_reduce_kernel<T><<<grid_for(groups * channels), kThreads, 0, stream>>>(
        static_cast<const T*>(a), static_cast<const T*>(dy), static_cast<T*>(db), channels, groups, rows / groups);
  });
  check_launch("mul_reduce_kernel");
}

}  // namespace trident::cuda::device
