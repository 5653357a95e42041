// Element-wise kernels of the cuda backend: grid-stride loops over 64-bit indices that load
// the storage type, compute in f32 and store rounded once. f32 results equal the reference
// backend's bit for bit (each output is one IEEE operation of the same operands).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/elementwise.h"

namespace trident::cuda::device {

namespace {

template <class T>
__global__ void relu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float v = to_float(x[i]);
    y[i] = from_float<T>(v > 0.f ? v : 0.f);
  }
}

template <class T>
__global__ void relu_backward_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                     int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride())
    dx[i] = to_float(y[i]) > 0.f ? dy[i] : from_float<T>(0.f);
}

// Not __restrict__: y may be a or b (an in-place add).
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride())
    y[i] = from_float<T>(__fadd_rn(to_float(a[i]), to_float(b[i])));
}

template <class T>
__global__ void mul_kernel(const T* a, const T* b, T* y, int64_t n, int64_t channels) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t j = channels > 0 ? i % channels : i;
    y[i] = from_float<T>(__fmul_rn(to_float(a[i]), to_float(b[j])));
  }
}

template <class T>
__global__ void clip_kernel(const T* x, T* y, int64_t n, float lo, float hi) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    float v = to_float(x[i]);
    v = v < lo ? lo : v;  // std::max(v, lo), NaN kept as the reference keeps it
    v = hi < v ? hi : v;  // std::min(v, hi)
    y[i] = from_float<T>(v);
  }
}

template <class U>
__global__ void fill_kernel(U* y, U bits, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) y[i] = bits;
}

template <class T>
__global__ void program_kernel(ElementwiseProgram prog, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float x0 = to_float(static_cast<const T*>(prog.inputs[0])[i]);
    for (int o = 0; o < prog.num_outputs; ++o) {
      float v = x0;
      for (int s = prog.first_step[o]; s < prog.first_step[o + 1]; ++s) {
        const int step = prog.steps[s];
        if (step == ElementwiseProgram::kRelu) v = v < 0.f ? 0.f : v;  // std::max(v, 0)
        else v = __fadd_rn(v, to_float(static_cast<const T*>(prog.inputs[step])[i]));
      }
      static_cast<T*>(prog.outputs[o])[i] = from_float<T>(v);
    }
  }
}

}  // namespace

void launch_relu(ElemType t, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    relu_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  check_launch("relu_kernel");
}

void launch_relu_backward(ElemType t, const void* y, const void* dy, void* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    relu_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(y),
                                                                  static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
  check_launch("relu_backward_kernel");
}

void launch_add(ElemType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                        static_cast<T*>(y), n);
  });
  check_launch("add_kernel");
}

void launch_mul(ElemType t, const void* a, const void* b, void* y, int64_t n, int64_t channels, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    mul_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                        static_cast<T*>(y), n, channels);
  });
  check_launch("mul_kernel");
}

void launch_clip(ElemType t, const void* x, void* y, int64_t n, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    clip_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, lo, hi);
  });
  check_launch("clip_kernel");
}

void launch_fill16(void* y, uint16_t bits, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint16_t*>(y), bits, n);
  check_launch("fill_kernel (16-bit)");
}

void launch_fill32(void* y, uint32_t bits, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<uint32_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint32_t*>(y), bits, n);
  check_launch("fill_kernel (32-bit)");
}

void launch_elementwise_program(ElemType t, const ElementwiseProgram& program, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    program_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(program, n);
  });
  check_launch("elementwise program_kernel");
}

}  // namespace trident::cuda::device
