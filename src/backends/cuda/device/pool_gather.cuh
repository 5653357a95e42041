// The max-pooling gradient of one input cell, gathered from the pooled gradient and the
// forward's window index: the one definition that maxpool2d_index_backward's kernels
// (pool.cu) and the batchnorm backward reading a pooled gradient (batchnorm_statistics.cu,
// batchnorm_backward.cu; passes/fold_maxpool_gradient.cpp) share, so both add the same terms in
// the same order and round once. Device code only (included by .cu files).
#pragma once
#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/fast_divide.h"
#include "backends/cuda/device/pool.h"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

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

// Window index of input cell (h, w) in the window of output (p, q).
template <class I>
__device__ __forceinline__ I window_cell(const PoolGeometry& g, int64_t p, int64_t q, int64_t h, int64_t w) {
  return static_cast<I>((h - (p * g.stride_h - g.pad_h)) * g.S + (w - (q * g.stride_w - g.pad_w)));
}

// dx of input cell (n, h, w) for channels c0 … c0 + K − 1: the dy of every window covering the
// cell whose index names it, added in f32 in the reference's (p, q) order, from 0. K > 1
// loads K channels as one pack (the caller checked C and the pointers allow it); the result is
// rounded to T by the caller.
template <int K, class T, class I>
__device__ __forceinline__ void gather_pooled_gradient(const PoolGeometry& g, const I* __restrict__ index,
                                                       const T* __restrict__ dy, int64_t n, int64_t h, int64_t w,
                                                       int64_t c0, float (&acc)[K]) {
  int64_t p_lo, p_hi, q_lo, q_hi;
  covering(h, g.pad_h, g.R, g.stride_h, g.P, p_lo, p_hi);
  covering(w, g.pad_w, g.S, g.stride_w, g.Q, q_lo, q_hi);
#pragma unroll
  for (int j = 0; j < K; ++j) acc[j] = 0.f;
  for (int64_t p = p_lo; p <= p_hi; ++p)
    for (int64_t q = q_lo; q <= q_hi; ++q) {
      const int64_t o = ((n * g.P + p) * g.Q + q) * g.C + c0;
      const I cell = window_cell<I>(g, p, q, h, w);
      const ElemPack<I, K> a = load_pack<K>(index + o);
      const ElemPack<T, K> d = load_pack<K>(dy + o);
#pragma unroll
      for (int j = 0; j < K; ++j)
        if (a.v[j] == cell) acc[j] = __fadd_rn(acc[j], to_float(d.v[j]));
    }
}

// Windows that tile their input (stride = window, no padding; VGG's 2×2): each cell lies in one
// window at most, so its gradient is one term, found by a few multiplications instead of the
// gather's loops. `fits` says whether the geometry is of that kind (and small enough for 32-bit
// arithmetic, with room for a grid-stride step past the last row); only then may `locate` be used.
struct TiledWindows {
  uint32_t H = 0, W = 0, P = 0, Q = 0, R = 1, S = 1;
  FastDivider by_W, by_H, by_R, by_S;
  bool fits = false;
  TiledWindows() = default;
  explicit TiledWindows(const PoolGeometry& g) {
    fits = g.stride_h == g.R && g.stride_w == g.S && g.pad_h == 0 && g.pad_w == 0 && g.R * g.S < 255 &&
           g.N * g.H * g.W < (int64_t{1} << 31) && g.N * g.P * g.Q * g.C < (int64_t{1} << 31) && g.R > 0 && g.S > 0;
    if (!fits) return;
    H = static_cast<uint32_t>(g.H), W = static_cast<uint32_t>(g.W), P = static_cast<uint32_t>(g.P);
    Q = static_cast<uint32_t>(g.Q), R = static_cast<uint32_t>(g.R), S = static_cast<uint32_t>(g.S);
    by_W = FastDivider(W), by_H = FastDivider(H), by_R = FastDivider(R), by_S = FastDivider(S);
  }
  // Row m (cell (n, h, w) of x) → the pooled row holding its window and its cell's number in
  // the window; false where no window covers the cell (rows and columns past the last window).
  __device__ __forceinline__ bool locate(uint32_t m, uint32_t& pooled_row, uint32_t& cell) const {
    const uint32_t nh = by_W.quotient(m), w = m - nh * W;
    const uint32_t n = by_H.quotient(nh), h = nh - n * H;
    const uint32_t p = by_R.quotient(h), q = by_S.quotient(w);
    if (p >= P || q >= Q) return false;
    pooled_row = (n * P + p) * Q + q;
    cell = (h - p * R) * S + (w - q * S);
    return true;
  }
};

// Row m of an [N·H·W, C] view as its cell (n, h, w); 32-bit arithmetic below 2^32 rows.
struct PooledCell {
  int64_t n, h, w;
};
__device__ __forceinline__ PooledCell cell_of_row(const PoolGeometry& g, int64_t m) {
  if (m < (int64_t{1} << 32)) {
    const uint32_t k = static_cast<uint32_t>(m), W = static_cast<uint32_t>(g.W), H = static_cast<uint32_t>(g.H);
    const uint32_t nh = k / W;
    return {static_cast<int64_t>(nh / H), static_cast<int64_t>(nh % H), static_cast<int64_t>(k % W)};
  }
  return {m / g.W / g.H, (m / g.W) % g.H, m % g.W};
}

}  // namespace trident::cuda::device
