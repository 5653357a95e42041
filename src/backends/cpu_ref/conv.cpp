// Reference 2-D convolution (NHWC activations, OHWI weights): forward, data and weight grads.
// Every inner loop is an axpy over a contiguous channel axis (K for forward and weight grad,
// C for data grad) so it vectorizes; only loops writing disjoint outputs run in parallel.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

// Input row/column read by output index `o` at filter tap `t`; may fall into the padding.
inline int64_t tap(int64_t o, int64_t t, int64_t stride, int64_t pad, int64_t dil) {
  return o * stride - pad + t * dil;
}

// Calls fn(r, s, h, w) for each filter tap (r, s) of output (p, q) whose input cell (h, w) is
// inside the input, taps in row-major order (padding taps are skipped).
template <class Fn>
inline void for_each_tap(const WindowGeom& g, int64_t p, int64_t q, Fn&& fn) {
  for (int64_t r = 0; r < g.R; ++r) {
    const int64_t h = tap(p, r, g.stride.h, g.pad.h, g.dil.h);
    if (h < 0 || h >= g.H) continue;
    for (int64_t s = 0; s < g.S; ++s) {
      const int64_t w = tap(q, s, g.stride.w, g.pad.w, g.dil.w);
      if (w < 0 || w >= g.W) continue;
      fn(r, s, h, w);
    }
  }
}

// The filter as [R, S, C/g, K]: for one input pixel and channel, the weights of every output
// channel are contiguous, so the forward becomes a sum of axpys over K (no horizontal sums).
template <class T>
std::vector<T> weights_k_last(const T* Wt, const WindowGeom& g) {
  std::vector<T> wt(static_cast<size_t>(g.K * g.R * g.S * g.Cg));
  for (int64_t k = 0; k < g.K; ++k)
    for (int64_t rsc = 0; rsc < g.R * g.S * g.Cg; ++rsc) wt[rsc * g.K + k] = Wt[k * g.R * g.S * g.Cg + rsc];
  return wt;
}

// y[n,p,q,:] = b + Σ_{r,s,c} x[n,h,w,c]·w[:,r,s,c]: each output pixel's K accumulators are
// its own row of y, updated in a fixed (r, s, c) order with the K axis vectorized.
template <class T>
void conv_forward(const KernelArgs& a) {
  const TensorView &x = a.in[0], &w = a.in[1], &y = a.out[0];
  const bool has_bias = a.in.size() == 3;
  const WindowGeom g = conv_geom(a, x.shape, w.shape, y.shape);
  expect_dtype(a, w, x.dtype, "the weight");
  expect_dtype(a, y, x.dtype, "the output");
  if (has_bias) expect_dtype(a, a.in[2], x.dtype, "the bias");
  const T* X = x.as<T>();
  const T* B = has_bias ? a.in[2].as<T>() : nullptr;
  T* Y = y.as<T>();
  const std::vector<T> wt_buf = weights_k_last(w.as<T>(), g);
  const T* WT = wt_buf.data();

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t p = 0; p < g.P; ++p) {
      for (int64_t q = 0; q < g.Q; ++q) {
        T* yp = Y + ((n * g.P + p) * g.Q + q) * g.K;
        for (int64_t k = 0; k < g.K; ++k) yp[k] = B ? B[k] : T(0);
        for_each_tap(g, p, q, [&](int64_t r, int64_t s, int64_t h, int64_t wi) {
          const T* xp = X + ((n * g.H + h) * g.W + wi) * g.C;
          for (int64_t grp = 0; grp < g.groups; ++grp) {
            T* yg = yp + grp * g.Kg;
            for (int64_t c = 0; c < g.Cg; ++c) {
              const T xv = xp[grp * g.Cg + c];
              const T* wp = WT + ((r * g.S + s) * g.Cg + c) * g.K + grp * g.Kg;
#pragma omp simd
              for (int64_t k = 0; k < g.Kg; ++k) yg[k] += xv * wp[k];
            }
          }
        });
      }
    }
  }
}

// dx is the scatter of dy through the filter: each sample is handled by one thread, which
// adds every dy[n,p,q,k]·w[k,r,s,:] into the input row it came from.
template <class T>
void conv_backward_data(const KernelArgs& a) {
  const TensorView &dy = a.in[0], &w = a.in[1], &dx = a.out[0];
  const WindowGeom g = conv_geom(a, dx.shape, w.shape, dy.shape);
  expect_dtype(a, w, dy.dtype, "the weight");
  expect_dtype(a, dx, dy.dtype, "the output");
  const T* DY = dy.as<T>();
  const T* Wt = w.as<T>();
  T* DX = dx.as<T>();

#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g.N; ++n) {
    T* dxn = DX + n * g.H * g.W * g.C;
    std::fill(dxn, dxn + g.H * g.W * g.C, T(0));
    for (int64_t p = 0; p < g.P; ++p) {
      for (int64_t q = 0; q < g.Q; ++q) {
        const T* dyp = DY + ((n * g.P + p) * g.Q + q) * g.K;
        for_each_tap(g, p, q, [&](int64_t r, int64_t s, int64_t h, int64_t wi) {
          T* dxp = dxn + (h * g.W + wi) * g.C;
          for (int64_t k = 0; k < g.K; ++k) {
            const T d = dyp[k];
            const T* wp = Wt + ((k * g.R + r) * g.S + s) * g.Cg;
            T* dst = dxp + (k / g.Kg) * g.Cg;
#pragma omp simd
            for (int64_t c = 0; c < g.Cg; ++c) dst[c] += d * wp[c];
          }
        });
      }
    }
  }
}

// dw[k,r,s,c] = Σ_{n,p,q} dy[n,p,q,k]·x[n,h,w,c]. Each thread owns a fixed contiguous block
// of output channels and accumulates it in a private [R,S,C/g,block] buffer, walking (n,p,q)
// in order with the K axis innermost (vectorized, as in the forward). Every dw element is
// thus summed in the same order whatever the thread count, with no shared cache lines.
template <class T>
void conv_backward_weight(const KernelArgs& a) {
  const TensorView &x = a.in[0], &dy = a.in[1], &dw = a.out[0];
  const bool has_bias = a.out.size() == 2;
  if (has_bias != (a.node.attrs.i("has_bias", has_bias ? 1 : 0) != 0))
    throw Error("node '" + a.node.name + "' (op " + a.node.op +
                "): attribute has_bias disagrees with the number of outputs");
  const WindowGeom g = conv_geom(a, x.shape, dw.shape, dy.shape);
  expect_dtype(a, dy, x.dtype, "dy");
  expect_dtype(a, dw, x.dtype, "dw");
  if (has_bias) expect_dtype(a, a.out[1], x.dtype, "db");
  const T* X = x.as<T>();
  const T* DY = dy.as<T>();
  T* DW = dw.as<T>();
  T* DB = has_bias ? a.out[1].as<T>() : nullptr;
  const int64_t taps = g.R * g.S * g.Cg;

#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t kb = g.K * t / nt, ke = g.K * (t + 1) / nt, width = ke - kb;
    std::vector<T> acc(static_cast<size_t>(taps * width), T(0));  // [R,S,Cg, kb..ke)
    std::vector<double> db(static_cast<size_t>(width), 0.0);
    const int64_t g_first = width > 0 ? kb / g.Kg : 0, g_last = width > 0 ? (ke - 1) / g.Kg : -1;
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t p = 0; p < g.P; ++p) {
        for (int64_t q = 0; q < g.Q; ++q) {
          const T* dyp = DY + ((n * g.P + p) * g.Q + q) * g.K;
          for (int64_t k = kb; k < ke; ++k) db[k - kb] += dyp[k];
          for_each_tap(g, p, q, [&](int64_t r, int64_t s, int64_t h, int64_t wi) {
            const T* xp = X + ((n * g.H + h) * g.W + wi) * g.C;
            for (int64_t grp = g_first; grp <= g_last; ++grp) {
              const int64_t k0 = std::max(kb, grp * g.Kg), k1 = std::min(ke, (grp + 1) * g.Kg);
              const T* dyg = dyp + k0;
              for (int64_t c = 0; c < g.Cg; ++c) {
                const T xv = xp[grp * g.Cg + c];
                T* dst = acc.data() + ((r * g.S + s) * g.Cg + c) * width + (k0 - kb);
#pragma omp simd
                for (int64_t k = 0; k < k1 - k0; ++k) dst[k] += xv * dyg[k];
              }
            }
          });
        }
      }
    }
    for (int64_t k = kb; k < ke; ++k) {
      for (int64_t rsc = 0; rsc < taps; ++rsc) DW[k * taps + rsc] = acc[rsc * width + (k - kb)];
      if (DB) DB[k] = static_cast<T>(db[k - kb]);
    }
  }
}

}  // namespace

void conv2d(const KernelArgs& args) {
  expect_arity(args, 2, 3, 1, 1);
  dispatch_float(args, args.in[0].dtype, [&](auto tag) { conv_forward<decltype(tag)>(args); });
}

void conv2d_backward_data(const KernelArgs& args) {
  run_float(args, 2, [&](auto tag) { conv_backward_data<decltype(tag)>(args); });
}

void conv2d_backward_weight(const KernelArgs& args) {
  expect_arity(args, 2, 2, 1, 2);
  dispatch_float(args, args.in[0].dtype,
                 [&](auto tag) { conv_backward_weight<decltype(tag)>(args); });
}

}  // namespace trident::cpu_ref
