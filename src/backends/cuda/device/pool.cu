// Pooling kernels of the cuda backend. Windowed pooling: one thread per output element
// (forward) or per input element (backward, a gather over the windows that cover it, visited
// in the reference's (p, q) order), grid-stride loops; max pooling also over 16-byte channel
// vectors (global average pooling is device/global_avgpool.cu's). Max pooling compares in f32,
// which orders f16/bf16 values exactly; averages accumulate in f64 like the reference backend,
// in a fixed order.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pool.h"
#include "backends/cuda/device/pool_gather.cuh"
#include "backends/cuda/device/vector.cuh"
#include "core/window_index.h"

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

// relu(x·scale + shift) of channel c, rounded to T as bn_apply stores it (defer_bn_apply's
// prologue, affine = [2, C] f32: scale, then shift), or x itself without an affine.
template <class T>
__device__ __forceinline__ float pooled_value(T x, const float* __restrict__ affine, int64_t C, int64_t c) {
  float v = to_float(x);
  if (!affine) return v;
  v = __fadd_rn(__fmul_rn(v, affine[c]), affine[C + c]);
  return to_float(from_float<T>(v > 0.f ? v : 0.f));
}

// The first row-major in-bounds cell holding the window's maximum for channel c (strict >),
// as h·W + w; -1 for an empty window. `xn` is sample n's [H,W,C] block.
template <class T>
__device__ int64_t window_argmax(const T* xn, const float* affine, const PoolGeometry& g, const Window& win, int64_t c,
                                 float& best) {
  if (win.cells() == 0) return -1;
  int64_t at = win.h0 * g.W + win.w0;
  best = pooled_value(xn[at * g.C + c], affine, g.C, c);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const float v = pooled_value(xn[(h * g.W + w) * g.C + c], affine, g.C, c);
      if (v > best) {
        best = v;
        at = h * g.W + w;
      }
    }
  return at;
}

// Window indices (core/window_index.h) are bytes; the backward's own scratch takes 16-bit ones
// for windows of more than 255 cells. The largest value of I marks an empty window.
template <class I>
constexpr I kEmpty = static_cast<I>(~I{0});
static_assert(kEmpty<unsigned char> == kEmptyWindow);

// y and/or the window index of each output element (scalar path); either may be null.
template <class T, class I>
__global__ void maxpool_forward_kernel(PoolGeometry g, const T* __restrict__ x, const float* __restrict__ affine,
                                       T* __restrict__ y, I* __restrict__ index) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position o = unflatten(i, g.P, g.Q, g.C);
    float best = 0.f;
    const int64_t at = window_argmax(x + o.n * g.H * g.W * g.C, affine, g, window_at(g, o.row, o.col), o.c, best);
    if (y) y[i] = from_float<T>(best);  // an empty window gives 0, as in the reference
    if (index)
      index[i] = at < 0 ? kEmpty<I> : window_cell<I>(g, o.row, o.col, at / g.W, at % g.W);
  }
}

// Every dx element sums the dy of the windows whose index names it, in the reference's (p, q)
// order (scalar path).
template <class T, class I>
__global__ void maxpool_backward_kernel(PoolGeometry g, const I* __restrict__ index,
                                        const T* __restrict__ dy, T* __restrict__ dx) {
  const int64_t total = g.N * g.H * g.W * g.C;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const Position at = unflatten(i, g.H, g.W, g.C);
    float acc[1];
    gather_pooled_gradient<1>(g, index, dy, at.n, at.row, at.col, at.c, acc);
    dx[i] = from_float<T>(acc[0]);
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

// ---- max pooling over 16-byte channel vectors (C a multiple of 8 in f16/bf16, 4 in f32) ----
// One thread handles one spatial position and 16 bytes of consecutive channels, so the index
// arithmetic is paid once per vector, not per element, and loads are 16 bytes wide. The
// comparisons and sums are the scalar kernels', element by element, in the same order.
template <class T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T v[kN];
};
template <class I, int N>
struct alignas(sizeof(I) * N) IndexPack {
  I v[N];
};

struct SpatialGroup {
  int64_t n, row, col, group;
};
__device__ __forceinline__ SpatialGroup unflatten_group(int64_t i, int64_t rows, int64_t cols, int64_t groups) {
  const Position p = unflatten(i, rows, cols, groups);  // the group plays the channel's part
  return {p.n, p.row, p.col, p.c};
}

// y and/or the window index (either may be null) over 16-byte channel vectors; with an affine,
// of relu(x·scale + shift) as bn_apply would have stored it (the thread's scale and shift held
// in registers). KR × KS > 0: the window's extents at compile time (3×3, 2×2), so the loops
// unroll and the window's loads are in flight together; 0 × 0: read from g.
template <class T, class I, int KR, int KS>
__global__ void maxpool_vec_kernel(PoolGeometry g, const T* __restrict__ x, const float* __restrict__ affine,
                                   T* __restrict__ y, I* __restrict__ index) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, total = g.N * g.P * g.Q * groups;
  const int R = KR > 0 ? KR : static_cast<int>(g.R), S = KS > 0 ? KS : static_cast<int>(g.S);
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup o = unflatten_group(i, g.P, g.Q, groups);
    const int64_t c0 = o.group * N;
    float scale[N], shift[N];
    if (affine)
      for (int j = 0; j < N; ++j) {
        scale[j] = affine[c0 + j];
        shift[j] = affine[g.C + c0 + j];
      }
    const T* xn = x + o.n * g.H * g.W * g.C + c0;
    const int64_t top = o.row * g.stride_h - g.pad_h, left = o.col * g.stride_w - g.pad_w;
    float best[N];
    I at[N];
    for (int j = 0; j < N; ++j) {
      best[j] = 0.f;  // an empty window gives 0, as in the reference
      at[j] = kEmpty<I>;
    }
    bool found = false;  // the first in-bounds cell, row-major, starts the maximum
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t h = top + r;
      if (h < 0 || h >= g.H) continue;
#pragma unroll
      for (int q = 0; q < S; ++q) {
        const int64_t w = left + q;
        if (w < 0 || w >= g.W) continue;
        const I cell = static_cast<I>(r * S + q);
        const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(xn + (h * g.W + w) * g.C);
        for (int j = 0; j < N; ++j) {
          float f = to_float(v.v[j]);
          if (affine) {
            f = __fadd_rn(__fmul_rn(f, scale[j]), shift[j]);
            f = to_float(from_float<T>(f > 0.f ? f : 0.f));
          }
          if (!found || f > best[j]) {
            best[j] = f;
            at[j] = cell;
          }
        }
        found = true;
      }
    }
    const int64_t out = i * N;  // ((n·P + p)·Q + q)·C + group·N
    if (y) {
      Vec16<T> r;
      for (int j = 0; j < N; ++j) r.v[j] = from_float<T>(best[j]);
      *reinterpret_cast<Vec16<T>*>(y + out) = r;
    }
    if (index) {
      IndexPack<I, N> r;
      for (int j = 0; j < N; ++j) r.v[j] = at[j];
      *reinterpret_cast<IndexPack<I, N>*>(index + out) = r;
    }
  }
}

// The vector forward with the window's extents fixed where they are 3×3 or 2×2.
template <class T, class I>
void launch_maxpool_vec(const PoolGeometry& g, const T* x, const float* affine, T* y, I* index, cudaStream_t stream) {
  const unsigned blocks = grid_for(g.N * g.P * g.Q * g.C / Vec16<T>::kN);
  if (g.R == 3 && g.S == 3)
    maxpool_vec_kernel<T, I, 3, 3><<<blocks, kThreads, 0, stream>>>(g, x, affine, y, index);
  else if (g.R == 2 && g.S == 2)
    maxpool_vec_kernel<T, I, 2, 2><<<blocks, kThreads, 0, stream>>>(g, x, affine, y, index);
  else
    maxpool_vec_kernel<T, I, 0, 0><<<blocks, kThreads, 0, stream>>>(g, x, affine, y, index);
}

template <class T, class I>
__global__ void maxpool_backward_vec_kernel(PoolGeometry g, const I* __restrict__ index,
                                            const T* __restrict__ dy, T* __restrict__ dx) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, total = g.N * g.H * g.W * groups;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup at = unflatten_group(i, g.H, g.W, groups);
    float acc[N];
    gather_pooled_gradient<N>(g, index, dy, at.n, at.row, at.col, at.group * N, acc);
    Vec16<T> r;
    for (int j = 0; j < N; ++j) r.v[j] = from_float<T>(acc[j]);
    *reinterpret_cast<Vec16<T>*>(dx + i * N) = r;
  }
}

// Stride-2 windows that reach at most two outputs per axis from any 2×2 block of input cells
// (ResNet's 3×3, stride 2, pad 1 stem pooling; VGG's 2×2 windows reach one): one thread per
// block and channel vector loads the windows' index and dy once and writes the block's four dx
// vectors, instead of each cell reloading the windows it shares with its neighbours. Sums in
// the same (p, q) order.
template <class T, class I>
__global__ void maxpool_backward_blocked_kernel(PoolGeometry g, int64_t first_p, int64_t first_q, int reach_p,
                                                int reach_q, const I* __restrict__ index, const T* __restrict__ dy,
                                                T* __restrict__ dx) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, block_rows = (g.H + 1) / 2, block_cols = (g.W + 1) / 2;
  const int64_t total = g.N * block_rows * block_cols * groups;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup b = unflatten_group(i, block_rows, block_cols, groups);
    IndexPack<I, N> at[2][2];
    Vec16<T> d[2][2];
    bool valid[2][2];
    const int64_t p0 = b.row + first_p, q0 = b.col + first_q;
    for (int u = 0; u < 2; ++u)
      for (int v = 0; v < 2; ++v) {
        const int64_t p = p0 + u, q = q0 + v;
        valid[u][v] = u < reach_p && v < reach_q && p >= 0 && p < g.P && q >= 0 && q < g.Q;
        if (!valid[u][v]) continue;
        const int64_t o = ((b.n * g.P + p) * g.Q + q) * g.C + b.group * N;
        at[u][v] = *reinterpret_cast<const IndexPack<I, N>*>(index + o);
        d[u][v] = *reinterpret_cast<const Vec16<T>*>(dy + o);
      }
    for (int a = 0; a < 2; ++a) {
      const int64_t h = 2 * b.row + a;
      if (h >= g.H) break;
      for (int c = 0; c < 2; ++c) {
        const int64_t w = 2 * b.col + c;
        if (w >= g.W) break;
        float acc[N];
        for (int j = 0; j < N; ++j) acc[j] = 0.f;
        for (int u = 0; u < 2; ++u) {
          const int64_t top = (p0 + u) * 2 - g.pad_h;
          if (u >= reach_p || h < top || h >= top + g.R) continue;
          for (int v = 0; v < 2; ++v) {
            const int64_t left = (q0 + v) * 2 - g.pad_w;
            if (!valid[u][v] || w < left || w >= left + g.S) continue;
            const I cell = static_cast<I>((h - top) * g.S + (w - left));
            for (int j = 0; j < N; ++j)
              if (at[u][v].v[j] == cell) acc[j] = __fadd_rn(acc[j], to_float(d[u][v].v[j]));
          }
        }
        Vec16<T> r;
        for (int j = 0; j < N; ++j) r.v[j] = from_float<T>(acc[j]);
        *reinterpret_cast<Vec16<T>*>(dx + ((b.n * g.H + h) * g.W + w) * g.C + b.group * N) = r;
      }
    }
  }
}

// Windows that tile the input exactly (stride = window, no padding, P·R = H and Q·S = W, as
// VGG's 2×2 pooling) cover every cell once: one thread per window and channel vector finds the
// window's first row-major maximum, as maxpool_vec_kernel does, and writes every dx of the window
// (dy at the maximum, 0 elsewhere). x and dy are read once and dx written once, with no argmax
// in between: about half the bytes of the two-pass gather.
template <class T>
__global__ void maxpool_backward_tiled_kernel(PoolGeometry g, const T* __restrict__ x, const T* __restrict__ dy,
                                              T* __restrict__ dx) {
  constexpr int N = Vec16<T>::kN;
  const int64_t groups = g.C / N, total = g.N * g.P * g.Q * groups;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    const SpatialGroup o = unflatten_group(i, g.P, g.Q, groups);
    const int64_t h0 = o.row * g.R, w0 = o.col * g.S;
    const int64_t plane = o.n * g.H * g.W * g.C + o.group * N;
    float best[N];
    int32_t at[N];
    const Vec16<T> v0 = *reinterpret_cast<const Vec16<T>*>(x + plane + (h0 * g.W + w0) * g.C);
    for (int j = 0; j < N; ++j) {
      best[j] = to_float(v0.v[j]);
      at[j] = 0;
    }
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(x + plane + ((h0 + r) * g.W + w0 + s) * g.C);
        const int32_t cell = static_cast<int32_t>(r * g.S + s);
        for (int j = 0; j < N; ++j) {
          const float f = to_float(v.v[j]);
          if (f > best[j]) {
            best[j] = f;
            at[j] = cell;
          }
        }
      }
    const Vec16<T> d = *reinterpret_cast<const Vec16<T>*>(dy + i * N);
    const T zero = from_float<T>(0.f);
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        const int32_t cell = static_cast<int32_t>(r * g.S + s);
        Vec16<T> out;
        for (int j = 0; j < N; ++j) out.v[j] = at[j] == cell ? d.v[j] : zero;
        *reinterpret_cast<Vec16<T>*>(dx + plane + ((h0 + r) * g.W + w0 + s) * g.C) = out;
      }
  }
}

bool tiles_exactly(const PoolGeometry& g) {
  return g.pad_h == 0 && g.pad_w == 0 && g.stride_h == g.R && g.stride_w == g.S && g.P * g.R == g.H &&
         g.Q * g.S == g.W;
}

// Whether the vector kernels apply: whole 16-byte channel vectors and aligned pointers.
template <class T>
bool vector_pooling(const PoolGeometry& g, std::initializer_list<const void*> pointers) {
  return g.C % Vec16<T>::kN == 0 && all_aligned_16(pointers);
}

}  // namespace

void launch_maxpool_forward(ElemType t, const PoolGeometry& g, const void* x, const float* affine, void* y,
                            void* window_index, cudaStream_t stream) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  if (total <= 0) return;
  auto* index = static_cast<unsigned char*>(window_index);
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if (vector_pooling<T>(g, {x, y, index})) {
      launch_maxpool_vec<T, unsigned char>(g, static_cast<const T*>(x), affine, static_cast<T*>(y), index, stream);
      return;
    }
    maxpool_forward_kernel<T, unsigned char><<<grid_for(total), kThreads, 0, stream>>>(
        g, static_cast<const T*>(x), affine, static_cast<T*>(y), index);
  });
  check_launch("maxpool_forward_kernel");
}

namespace {

// Every window's index into `index`, from x.
template <class T, class I>
void launch_window_index(const PoolGeometry& g, const T* x, I* index, cudaStream_t stream) {
  const int64_t windows = g.N * g.P * g.Q * g.C;
  if (windows <= 0) return;
  if (vector_pooling<T>(g, {x, index}))
    launch_maxpool_vec<T, I>(g, x, nullptr, nullptr, index, stream);
  else
    maxpool_forward_kernel<T, I><<<grid_for(windows), kThreads, 0, stream>>>(g, x, nullptr, nullptr, index);
}

// The first output row (or column) whose stride-2 window reaches input block b (cells 2b and
// 2b + 1) is b + first_output(pad, extent): ceil((pad − extent + 1) / 2), for either sign.
int64_t first_output(int64_t pad, int64_t extent) {
  const int64_t n = pad - extent + 1;
  return n >= 0 ? (n + 1) / 2 : -((-n) / 2);
}
// Outputs reaching block b: [b + first_output, b + (1 + pad) / 2]; the kernel holds two per axis.
int64_t reach(int64_t pad, int64_t extent) { return (1 + pad) / 2 - first_output(pad, extent) + 1; }
bool blocked_gather(const PoolGeometry& g) {
  if (g.stride_h != 2 || g.stride_w != 2 || g.pad_h < 0 || g.pad_w < 0) return false;
  return reach(g.pad_h, g.R) <= 2 && reach(g.pad_w, g.S) <= 2;
}

// The gather: every dx element sums the dy of the windows whose index names it.
template <class T, class I>
void launch_index_gather(const PoolGeometry& g, const I* index, const T* dy, T* dx, cudaStream_t stream) {
  const int64_t total = g.N * g.H * g.W * g.C;
  if (vector_pooling<T>(g, {index, dy, dx}) && blocked_gather(g)) {
    const int64_t blocks = g.N * ((g.H + 1) / 2) * ((g.W + 1) / 2) * (g.C / Vec16<T>::kN);
    maxpool_backward_blocked_kernel<T, I><<<grid_for(blocks), kThreads, 0, stream>>>(
        g, first_output(g.pad_h, g.R), first_output(g.pad_w, g.S), static_cast<int>(reach(g.pad_h, g.R)),
        static_cast<int>(reach(g.pad_w, g.S)), index, dy, dx);
  } else if (vector_pooling<T>(g, {index, dy, dx}))
    maxpool_backward_vec_kernel<T, I><<<grid_for(total / Vec16<T>::kN), kThreads, 0, stream>>>(g, index, dy, dx);
  else
    maxpool_backward_kernel<T, I><<<grid_for(total), kThreads, 0, stream>>>(g, index, dy, dx);
}

}  // namespace

int64_t maxpool_backward_scratch_bytes(const PoolGeometry& g) {
  const int64_t width = g.R * g.S > kMostWindowCells ? 2 : 1;
  return g.N * g.P * g.Q * g.C * width;
}

void launch_maxpool_backward(ElemType t, const PoolGeometry& g, const void* x, const void* dy, void* dx,
                             void* scratch, cudaStream_t stream) {
  const int64_t total = g.N * g.H * g.W * g.C;
  if (total <= 0) return;
  if (g.R * g.S >= 0xFFFF) throw Error("max pooling windows of 65535 cells or more are not supported");
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    if (tiles_exactly(g) && vector_pooling<T>(g, {x, dy, dx})) {
      maxpool_backward_tiled_kernel<T>
          <<<grid_for(g.N * g.P * g.Q * g.C / Vec16<T>::kN), kThreads, 0, stream>>>(g, xs, dys, dxs);
      return;
    }
    if (g.R * g.S > kMostWindowCells) {
      auto* index = static_cast<uint16_t*>(scratch);
      launch_window_index<T>(g, xs, index, stream);
      launch_index_gather<T>(g, static_cast<const uint16_t*>(index), dys, dxs, stream);
    } else {
      auto* index = static_cast<unsigned char*>(scratch);
      launch_window_index<T>(g, xs, index, stream);
      launch_index_gather<T>(g, static_cast<const unsigned char*>(index), dys, dxs, stream);
    }
  });
  check_launch("maxpool_backward_kernel");
}

void launch_maxpool_index_backward(ElemType t, const PoolGeometry& g, const void* window_index, const void* dy,
                                   void* dx, cudaStream_t stream) {
  if (g.N * g.H * g.W * g.C <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_index_gather<T>(g, static_cast<const unsigned char*>(window_index), static_cast<const T*>(dy),
                           static_cast<T*>(dx), stream);
  });
  check_launch("maxpool_index_backward_kernel");
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

}  // namespace trident::cuda::device
