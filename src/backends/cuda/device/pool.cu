// Pooling kernels of the cuda backend. One thread per output element (forward) or per input
// element (backward, a gather over the windows that cover it, visited in the reference's
// (p, q) order), 64-bit indices, grid-stride loops. Max pooling compares in f32, which orders
// f16/bf16 values exactly; averages accumulate in f64 like the reference backend.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pool.h"

namespace trident::cuda::device {

namespace {

// Position of one NHWC element of the pooled tensor [N,P,Q,C] (or of x [N,H,W,C]).
struct Position {
  int64_t n, row, col, c;
};

__device__ __forceinline__ Position unflatten(int64_t i, int64_t rows, int64_t cols, int64_t C) {
  Position pos;
  // 64-bit division is emulated on the GPU and dominated these kernels: below 2^32 elements
  // (every real layer) the same arithmetic runs in 32 bits.
  if (i < (int64_t{1} << 32)) {
    uint32_t k = static_cast<uint32_t>(i);
    const uint32_t c32 = static_cast<uint32_t>(C), cols32 = static_cast<uint32_t>(cols),
                   rows32 = static_cast<uint32_t>(rows);
    pos.c = k % c32;
    k /= c32;
    pos.col = k % cols32;
    k /= cols32;
    pos.row = k % rows32;
    pos.n = k / rows32;
    return pos;
  }
  pos.c = i % C;
  i /= C;
  pos.col = i % cols;
  i /= cols;
  pos.row = i % rows;
  pos.n = i / rows;
  return pos;
}

// The in-bounds part of output (p, q)'s window: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
  __device__ int64_t cells() const { return (h1 > h0 && w1 > w0) ? (h1 - h0) * (w1 - w0) : 0; }
};

__device__ __forceinline__ Window window_at(const PoolGeometry& g, int64_t p, int64_t q) {
  const int64_t hs = p * g.stride_h - g.pad_h, ws = q * g.stride_w - g.pad_w;
  return {hs > 0 ? hs : 0, hs + g.R < g.H ? hs + g.R : g.H, ws > 0 ? ws : 0, ws + g.S < g.W ? ws + g.S : g.W};
}

// Output rows p whose window covers input row h: [lo, hi], empty when lo > hi.
__device__ __forceinline__ void covering(int64_t h, int64_t pad, int64_t extent, int64_t stride, int64_t outputs,
                                         int64_t& lo, int64_t& hi) {
  // Extents, pads and strides are small: 32-bit division (64-bit division is emulated).
  const int32_t first = static_cast<int32_t>(h + pad - extent + 1);  // lowest window start reaching h
  const int32_t s = static_cast<int32_t>(stride);
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  hi = static_cast<int32_t>(h + pad) / s;
  if (hi > outputs - 1) hi = outputs - 1;
}

// The first row-major in-bounds cell holding the window's maximum for channel c (strict >),
// as h·W + w; -1 for an empty window. `xn` is sample n's [H,W,C] block.
template <class T>
__device__ int64_t window_argmax(const T* xn, const PoolGeometry& g, const Window& win, int64_t c, float& best) {
  if (win.cells() == 0) return -1;
  int64_t at = win.h0 * g.W + win.w0;
  best = to_float(xn[at * g.C + c]);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const float v = to_float(xn[(h * g.W + w) * g.C + c]);
      if (v > best) {
        best = v;
        at = h * g.W + w;
      }
    }
  return at;
}

template <class T>
__global__ void maxpool_forward_kernel(PoolGeometry g, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position o = unflatten(i, g.P, g.Q, g.C);
    float best = 0.f;
    window_argmax(x + o.n * g.H * g.W * g.C, g, window_at(g, o.row, o.col), o.c, best);
    y[i] = from_float<T>(best);  // an empty window gives 0, as in the reference
  }
}

template <class T>
__global__ void maxpool_argmax_kernel(PoolGeometry g, const T* __restrict__ x, int32_t* __restrict__ argmax) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position at = unflatten(i, g.P, g.Q, g.C);
    float best;
    argmax[i] = static_cast<int32_t>(
        window_argmax(x + at.n * g.H * g.W * g.C, g, window_at(g, at.row, at.col), at.c, best));
  }
}

template <class T>
__global__ void maxpool_backward_kernel(PoolGeometry g, const int32_t* __restrict__ argmax, const T* __restrict__ dy,
                                        T* __restrict__ dx) {
  const int64_t total = g.N * g.H * g.W * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position at = unflatten(i, g.H, g.W, g.C);
    const int64_t cell = at.row * g.W + at.col;
    int64_t p_lo, p_hi, q_lo, q_hi;
    covering(at.row, g.pad_h, g.R, g.stride_h, g.P, p_lo, p_hi);
    covering(at.col, g.pad_w, g.S, g.stride_w, g.Q, q_lo, q_hi);
    float acc = 0.f;
    for (int64_t p = p_lo; p <= p_hi; ++p)
      for (int64_t q = q_lo; q <= q_hi; ++q) {
        const int64_t o = ((at.n * g.P + p) * g.Q + q) * g.C + at.c;
        if (argmax[o] == cell) acc = __fadd_rn(acc, to_float(dy[o]));
      }
    dx[i] = from_float<T>(acc);
  }
}

__device__ __forceinline__ int64_t avg_divisor(const PoolGeometry& g, const Window& win) {
  return g.count_include_pad ? g.R * g.S : win.cells();
}

template <class T>
__global__ void avgpool_forward_kernel(PoolGeometry g, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position o = unflatten(i, g.P, g.Q, g.C);
    const Window win = window_at(g, o.row, o.col);
    const T* xn = x + o.n * g.H * g.W * g.C;
    double acc = 0.0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) acc += static_cast<double>(to_float(xn[(h * g.W + w) * g.C + o.c]));
    const int64_t div = avg_divisor(g, win);
    y[i] = from_float<T>(div > 0 ? static_cast<float>(acc / static_cast<double>(div)) : 0.f);
  }
}

template <class T>
__global__ void avgpool_backward_kernel(PoolGeometry g, const T* __restrict__ dy, T* __restrict__ dx) {
  const int64_t total = g.N * g.H * g.W * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position at = unflatten(i, g.H, g.W, g.C);
    int64_t p_lo, p_hi, q_lo, q_hi;
    covering(at.row, g.pad_h, g.R, g.stride_h, g.P, p_lo, p_hi);
    covering(at.col, g.pad_w, g.S, g.stride_w, g.Q, q_lo, q_hi);
    float acc = 0.f;
    for (int64_t p = p_lo; p <= p_hi; ++p)
      for (int64_t q = q_lo; q <= q_hi; ++q) {
        const int64_t div = avg_divisor(g, window_at(g, p, q));
        if (div == 0) continue;
        const float scale = __fdiv_rn(1.f, static_cast<float>(div));
        acc = __fadd_rn(acc, __fmul_rn(to_float(dy[((at.n * g.P + p) * g.Q + q) * g.C + at.c]), scale));
      }
    dx[i] = from_float<T>(acc);
  }
}

// One block per (channel tile, sample): threadIdx.x picks the channel, threadIdx.y strides
// over the HW positions; the blockDim.y partial sums are then added in a fixed order.
template <class T>
__global__ void global_avgpool_forward_kernel(int64_t N, int64_t HW, int64_t C, const T* __restrict__ x,
                                              T* __restrict__ y) {
  extern __shared__ double partial[];  // [blockDim.y][blockDim.x]
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    double acc = 0.0;
    if (c < C)
      for (int64_t i = threadIdx.y; i < HW; i += blockDim.y) acc += static_cast<double>(to_float(x[(n * HW + i) * C + c]));
    partial[threadIdx.y * blockDim.x + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
      double sum = 0.0;
      for (unsigned r = 0; r < blockDim.y; ++r) sum += partial[r * blockDim.x + threadIdx.x];
      y[n * C + c] = from_float<T>(static_cast<float>(sum / static_cast<double>(HW)));
    }
    __syncthreads();
  }
}

template <class T>
__global__ void global_avgpool_backward_kernel(int64_t HW, int64_t C, int64_t total, const T* __restrict__ dy,
                                               T* __restrict__ dx) {
  const float scale = __fdiv_rn(1.f, static_cast<float>(HW));
  const bool small = total < (int64_t{1} << 32);  // 32-bit index arithmetic (see unflatten)
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    int64_t c, n;
    if (small) {
      const uint32_t k = static_cast<uint32_t>(i);
      c = k % static_cast<uint32_t>(C);
      n = k / static_cast<uint32_t>(HW * C);
    } else {
      c = i % C;
      n = i / (HW * C);
    }
    dx[i] = from_float<T>(__fmul_rn(to_float(dy[n * C + c]), scale));
  }
}


// ---- max pooling over 16-byte channel vectors (C a multiple of 8 in f16/bf16, 4 in f32) ----
// One thread handles one spatial position and 16 bytes of consecutive channels, so the index
// arithmetic is paid once per vector, not per element, and loads are 16 bytes wide. The
// comparisons and sums are the scalar kernels', element by element, in the same order.
template <class T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T v[kN];
};
template <int N>
struct alignas(16) IndexVec {
  int32_t v[N];
};

struct SpatialGroup {
  int64_t n, row, col, group;
};
__device__ __forceinline__ SpatialGroup unflatten_group(int64_t i, int64_t rows, int64_t cols, int64_t groups) {
  const Position p = unflatten(i, rows, cols, groups);  // the group plays the channel's part
  return {p.n, p.row, p.col, p.c};
}

template <class T>
__global__ void maxpool_vec_kernel(PoolGeometry g, const T* __restrict__ x, T* __restrict__ y,
                                   int32_t* __restrict__ argmax) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, total = g.N * g.P * g.Q * groups;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup o = unflatten_group(i, g.P, g.Q, groups);
    const Window win = window_at(g, o.row, o.col);
    const T* xn = x + o.n * g.H * g.W * g.C + o.group * N;
    float best[N];
    int32_t at[N];
    if (win.cells() == 0) {
      for (int j = 0; j < N; ++j) {
        best[j] = 0.f;  // an empty window gives 0, as in the reference
        at[j] = -1;
      }
    } else {
      const int32_t first = static_cast<int32_t>(win.h0 * g.W + win.w0);
      const Vec16<T> v0 = *reinterpret_cast<const Vec16<T>*>(xn + first * g.C);
      for (int j = 0; j < N; ++j) {
        best[j] = to_float(v0.v[j]);
        at[j] = first;
      }
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const int32_t cell = static_cast<int32_t>(h * g.W + w);
          const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(xn + cell * g.C);
          for (int j = 0; j < N; ++j) {
            const float f = to_float(v.v[j]);
            if (f > best[j]) {
              best[j] = f;
              at[j] = cell;
            }
          }
        }
    }
    const int64_t out = i * N;  // ((n·P + p)·Q + q)·C + group·N
    if (y) {
      Vec16<T> r;
      for (int j = 0; j < N; ++j) r.v[j] = from_float<T>(best[j]);
      *reinterpret_cast<Vec16<T>*>(y + out) = r;
    }
    if (argmax) {
      IndexVec<N> r;
      for (int j = 0; j < N; ++j) r.v[j] = at[j];
      *reinterpret_cast<IndexVec<N>*>(argmax + out) = r;
    }
  }
}

template <class T>
__global__ void maxpool_backward_vec_kernel(PoolGeometry g, const int32_t* __restrict__ argmax,
                                            const T* __restrict__ dy, T* __restrict__ dx) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, total = g.N * g.H * g.W * groups;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup at = unflatten_group(i, g.H, g.W, groups);
    const int32_t cell = static_cast<int32_t>(at.row * g.W + at.col);
    int64_t p_lo, p_hi, q_lo, q_hi;
    covering(at.row, g.pad_h, g.R, g.stride_h, g.P, p_lo, p_hi);
    covering(at.col, g.pad_w, g.S, g.stride_w, g.Q, q_lo, q_hi);
    float acc[N];
    for (int j = 0; j < N; ++j) acc[j] = 0.f;
    for (int64_t p = p_lo; p <= p_hi; ++p)
      for (int64_t q = q_lo; q <= q_hi; ++q) {
        const int64_t o = ((at.n * g.P + p) * g.Q + q) * g.C + at.group * N;
        const IndexVec<N> a = *reinterpret_cast<const IndexVec<N>*>(argmax + o);
        const Vec16<T> d = *reinterpret_cast<const Vec16<T>*>(dy + o);
        for (int j = 0; j < N; ++j)
          if (a.v[j] == cell) acc[j] = __fadd_rn(acc[j], to_float(d.v[j]));
      }
    Vec16<T> r;
    for (int j = 0; j < N; ++j) r.v[j] = from_float<T>(acc[j]);
    *reinterpret_cast<Vec16<T>*>(dx + i * N) = r;
  }
}

bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the vector kernels apply: whole 16-byte channel vectors and aligned pointers.
template <class T>
bool vector_pooling(const PoolGeometry& g, std::initializer_list<const void*> pointers) {
  if (g.C % Vec16<T>::kN != 0) return false;
  for (const void* p : pointers)
    if (p && !aligned_16(p)) return false;
  return true;
}

}  // namespace

void launch_maxpool_forward(ElemType t, const PoolGeometry& g, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  if (total <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if (vector_pooling<T>(g, {x, y})) {
      maxpool_vec_kernel<T><<<grid_for(total / Vec16<T>::kN), kThreads, 0, stream>>>(
          g, static_cast<const T*>(x), static_cast<T*>(y), nullptr);
      return;
    }
    maxpool_forward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y));
  });
  check_launch("maxpool_forward_kernel");
}

void launch_maxpool_backward(ElemType t, const PoolGeometry& g, const void* x, const void* dy, void* dx,
                             int32_t* argmax, cudaStream_t stream) {
  const int64_t total = g.N * g.H * g.W * g.C;
  if (total <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    const int64_t windows = g.N * g.P * g.Q * g.C;
    if (vector_pooling<T>(g, {x, dy, dx, argmax})) {
      constexpr int N = Vec16<T>::kN;
      if (windows > 0)
        maxpool_vec_kernel<T><<<grid_for(windows / N), kThreads, 0, stream>>>(g, static_cast<const T*>(x), nullptr,
                                                                              argmax);
      maxpool_backward_vec_kernel<T><<<grid_for(total / N), kThreads, 0, stream>>>(
          g, argmax, static_cast<const T*>(dy), static_cast<T*>(dx));
      return;
    }
    if (windows > 0)
      maxpool_argmax_kernel<T><<<grid_for(windows), kThreads, 0, stream>>>(g, static_cast<const T*>(x), argmax);
    maxpool_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, argmax, static_cast<const T*>(dy),
                                                                         static_cast<T*>(dx));
  });
  check_launch("maxpool_backward_kernel");
}

void launch_avgpool_forward(ElemType t, const PoolGeometry& g, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  if (total <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    avgpool_forward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y));
  });
  check_launch("avgpool_forward_kernel");
}

void launch_avgpool_backward(ElemType t, const PoolGeometry& g, const void* dy, void* dx, cudaStream_t stream) {
  const int64_t total = g.N * g.H * g.W * g.C;
  if (total <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    avgpool_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, static_cast<const T*>(dy),
                                                                         static_cast<T*>(dx));
  });
  check_launch("avgpool_backward_kernel");
}

void launch_global_avgpool_forward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* x, void* y,
                                   cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  if (HW <= 0) throw Error("global average pooling over an empty H×W has no mean");
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < C) tx *= 2;
  const dim3 block(tx, kThreads / tx);
  const dim3 grid(static_cast<unsigned>((C + tx - 1) / tx), static_cast<unsigned>(N < 65535 ? N : 65535));
  const size_t shared = sizeof(double) * kThreads;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_forward_kernel<T><<<grid, block, shared, stream>>>(N, HW, C, static_cast<const T*>(x),
                                                                      static_cast<T*>(y));
  });
  check_launch("global_avgpool_forward_kernel");
}

void launch_global_avgpool_backward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* dy, void* dx,
                                    cudaStream_t stream) {
  const int64_t total = N * HW * C;
  if (total <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(HW, C, total,
                                                                                static_cast<const T*>(dy),
                                                                                static_cast<T*>(dx));
  });
  check_launch("global_avgpool_backward_kernel");
}

}  // namespace trident::cuda::device
