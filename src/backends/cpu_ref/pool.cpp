// Reference pooling over NHWC tensors: max, average and global average, with backward.
// Forward loops keep the channel axis innermost (one window walk serves all channels);
// backward passes scatter into dx one sample per thread, so the sum order is fixed.
#include <algorithm>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "core/window_index.h"

namespace trident::cpu_ref {

namespace {

// The in-bounds part of the window of output (p, q): rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t cells() const { return std::max<int64_t>(0, h1 - h0) * std::max<int64_t>(0, w1 - w0); }
};

inline Window window_at(const WindowGeom& g, int64_t p, int64_t q) {
  const int64_t hs = p * g.stride.h - g.pad.h, ws = q * g.stride.w - g.pad.w;
  return {std::max<int64_t>(hs, 0), std::min(hs + g.R, g.H), std::max<int64_t>(ws, 0),
          std::min(ws + g.S, g.W)};
}

// Maxpool's forward and backward share one argmax rule: the first row-major in-bounds cell
// holding the maximum wins (strict >), and padding never wins. `fn(c, h, w)` receives it.
template <class T, class Fn>
void for_each_argmax(const T* xn, const WindowGeom& g, const Window& win, std::vector<T>& best,
                     std::vector<int64_t>& at, Fn&& fn) {
  if (win.cells() == 0) return;
  const T* first = xn + (win.h0 * g.W + win.w0) * g.C;
  for (int64_t c = 0; c < g.C; ++c) {
    best[c] = first[c];
    at[c] = win.h0 * g.W + win.w0;
  }
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const T* xp = xn + (h * g.W + w) * g.C;
      for (int64_t c = 0; c < g.C; ++c)
        if (xp[c] > best[c]) {
          best[c] = xp[c];
          at[c] = h * g.W + w;
        }
    }
  for (int64_t c = 0; c < g.C; ++c) fn(c, at[c], best[c]);
}

// The backward scatters without scratch: sample n's dx zeroed, then `body(n, dxn, p, q)` for
// every output cell (p, q) in row-major order, one sample per thread, so the sum order is fixed.
template <class T, class Body>
void scatter_per_sample(const WindowGeom& g, T* DX, Body&& body) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g.N; ++n) {
    T* dxn = DX + n * g.H * g.W * g.C;
    std::fill(dxn, dxn + g.H * g.W * g.C, T(0));
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q) body(n, dxn, p, q);
  }
}

// The window index byte (core/window_index.h) of cell h·W + w in the window of output (p, q).
inline unsigned char window_cell(const WindowGeom& g, int64_t p, int64_t q, int64_t cell) {
  const int64_t r = cell / g.W - (p * g.stride.h - g.pad.h), s = cell % g.W - (q * g.stride.w - g.pad.w);
  return static_cast<unsigned char>(r * g.S + s);
}

// The window index's bytes, checked against the pooled tensor it describes.
unsigned char* window_index_bytes(const KernelArgs& a, const TensorView& index, const Shape& pooled) {
  if (index.dtype != DType::i32 || index.shape != window_index_shape(numel(pooled)))
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): the window index must be i32 " +
                shape_str(window_index_shape(numel(pooled))));
  return reinterpret_cast<unsigned char*>(index.as<int32_t>());
}

template <class T>
void maxpool_forward(const KernelArgs& a) {
  const TensorView &x = a.in[0], &y = a.out[0];
  expect_dtype(a, y, x.dtype, "y");
  const WindowGeom g = pool_geom(a, x.shape, y.shape);
  const T* X = x.as<T>();
  T* Y = y.as<T>();
  unsigned char* index = a.out.size() > 1 ? window_index_bytes(a, a.out[1], y.shape) : nullptr;
#pragma omp parallel
  {
    std::vector<T> best(g.C);
    std::vector<int64_t> at(g.C);
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t p = 0; p < g.P; ++p)
        for (int64_t q = 0; q < g.Q; ++q) {
          const int64_t o = ((n * g.P + p) * g.Q + q) * g.C;
          T* yp = Y + o;
          const Window win = window_at(g, p, q);
          if (win.cells() == 0) {
            std::fill(yp, yp + g.C, T(0));
            if (index) std::fill(index + o, index + o + g.C, static_cast<unsigned char>(kEmptyWindow));
          }
          for_each_argmax(X + n * g.H * g.W * g.C, g, win, best, at, [&](int64_t c, int64_t cell, T v) {
            yp[c] = v;
            if (index) index[o + c] = window_cell(g, p, q, cell);
          });
        }
  }
}

template <class T>
void maxpool_backward(const KernelArgs& a) {
  const TensorView &x = a.in[0], &dy = a.in[1], &dx = a.out[0];
  expect_dtype(a, dy, x.dtype, "dy");
  expect_dtype(a, dx, x.dtype, "dx");
  if (dx.shape != x.shape)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): dx must have x's shape");
  const WindowGeom g = pool_geom(a, x.shape, dy.shape);
  const T* X = x.as<T>();
  const T* DY = dy.as<T>();
  T* DX = dx.as<T>();
#pragma omp parallel
  {
    std::vector<T> best(g.C);
    std::vector<int64_t> at(g.C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      T* dxn = DX + n * g.H * g.W * g.C;
      std::fill(dxn, dxn + g.H * g.W * g.C, T(0));
      for (int64_t p = 0; p < g.P; ++p)
        for (int64_t q = 0; q < g.Q; ++q) {
          const T* dyp = DY + ((n * g.P + p) * g.Q + q) * g.C;
          for_each_argmax(X + n * g.H * g.W * g.C, g, window_at(g, p, q), best, at,
                          [&](int64_t c, int64_t cell, T) { dxn[cell * g.C + c] += dyp[c]; });
        }
    }
  }
}

// dx from the forward's window index instead of x: the same scatter, in the same order.
template <class T>
void maxpool_index_backward(const KernelArgs& a) {
  const TensorView &index = a.in[0], &dy = a.in[1], &dx = a.out[0];
  expect_dtype(a, dx, dy.dtype, "dx");
  const WindowGeom g = pool_geom(a, dx.shape, dy.shape);
  const unsigned char* I = window_index_bytes(a, index, dy.shape);
  const T* DY = dy.as<T>();
  scatter_per_sample(g, dx.as<T>(), [&](int64_t n, T* dxn, int64_t p, int64_t q) {
    const int64_t o = ((n * g.P + p) * g.Q + q) * g.C;
    for (int64_t c = 0; c < g.C; ++c) {
      const int64_t cell = I[o + c];
      if (cell == kEmptyWindow) continue;
      const int64_t h = p * g.stride.h - g.pad.h + cell / g.S, w = q * g.stride.w - g.pad.w + cell % g.S;
      if (h < 0 || h >= g.H || w < 0 || w >= g.W)
        throw Error("node '" + a.node.name + "' (op " + a.node.op + "): window index " + std::to_string(cell) +
                    " names a cell outside the input");
      dxn[(h * g.W + w) * g.C + c] += DY[o + c];
    }
  });
}

// The forward divisor of window (p, q): its full size, or only its in-bounds cells.
inline int64_t avg_divisor(const WindowGeom& g, const Window& win, bool include_pad) {
  return include_pad ? g.R * g.S : win.cells();
}

template <class T>
void avgpool_forward(const KernelArgs& a) {
  const TensorView &x = a.in[0], &y = a.out[0];
  expect_dtype(a, y, x.dtype, "y");
  const WindowGeom g = pool_geom(a, x.shape, y.shape);
  const bool include_pad = g.count_include_pad;
  const T* X = x.as<T>();
  T* Y = y.as<T>();
#pragma omp parallel
  {
    std::vector<double> acc(g.C);
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t p = 0; p < g.P; ++p)
        for (int64_t q = 0; q < g.Q; ++q) {
          const Window win = window_at(g, p, q);
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t h = win.h0; h < win.h1; ++h)
            for (int64_t w = win.w0; w < win.w1; ++w) {
              const T* xp = X + ((n * g.H + h) * g.W + w) * g.C;
              for (int64_t c = 0; c < g.C; ++c) acc[c] += xp[c];
            }
          const int64_t div = avg_divisor(g, win, include_pad);
          T* yp = Y + ((n * g.P + p) * g.Q + q) * g.C;
          for (int64_t c = 0; c < g.C; ++c)
            yp[c] = div > 0 ? static_cast<T>(acc[c] / static_cast<double>(div)) : T(0);
        }
  }
}

template <class T>
void avgpool_backward(const KernelArgs& a) {
  const TensorView &dy = a.in[0], &dx = a.out[0];
  expect_dtype(a, dx, dy.dtype, "dx");
  const WindowGeom g = pool_geom(a, dx.shape, dy.shape);
  const bool include_pad = g.count_include_pad;
  const T* DY = dy.as<T>();
  scatter_per_sample(g, dx.as<T>(), [&](int64_t n, T* dxn, int64_t p, int64_t q) {
    const Window win = window_at(g, p, q);
    const int64_t div = avg_divisor(g, win, include_pad);
    if (div == 0) return;
    const T scale = T(1) / static_cast<T>(div);
    const T* dyp = DY + ((n * g.P + p) * g.Q + q) * g.C;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) {
        T* dst = dxn + (h * g.W + w) * g.C;
#pragma omp simd
        for (int64_t c = 0; c < g.C; ++c) dst[c] += dyp[c] * scale;
      }
  });
}

void expect_global_shapes(const KernelArgs& a, const TensorView& big, const TensorView& small) {
  expect_rank(a, big, 4, "the spatial tensor");
  const Shape want{big.shape[0], 1, 1, big.shape[3]};
  if (small.shape != want)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): pooled tensor has shape " +
                shape_str(small.shape) + " but " + shape_str(want) + " was expected");
  expect_dtype(a, small, big.dtype, "the pooled tensor");
}

template <class T>
void global_avgpool_forward(const KernelArgs& a) {
  const TensorView &x = a.in[0], &y = a.out[0];
  expect_global_shapes(a, x, y);
  const int64_t N = x.shape[0], HW = x.shape[1] * x.shape[2], C = x.shape[3];
  const T* X = x.as<T>();
  T* Y = y.as<T>();
#pragma omp parallel
  {
    std::vector<double> acc(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < HW; ++i) {
        const T* xp = X + (n * HW + i) * C;
        for (int64_t c = 0; c < C; ++c) acc[c] += xp[c];
      }
      for (int64_t c = 0; c < C; ++c) Y[n * C + c] = static_cast<T>(acc[c] / static_cast<double>(HW));
    }
  }
}

template <class T>
void global_avgpool_backward_t(const KernelArgs& a) {
  const TensorView &dy = a.in[0], &dx = a.out[0];
  expect_global_shapes(a, dx, dy);
  const int64_t N = dx.shape[0], HW = dx.shape[1] * dx.shape[2], C = dx.shape[3];
  const T* DY = dy.as<T>();
  T* DX = dx.as<T>();
  const T scale = T(1) / static_cast<T>(HW);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i) {
      T* dst = DX + (n * HW + i) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dst[c] = DY[n * C + c] * scale;
    }
}

}  // namespace

void maxpool2d(const KernelArgs& args) {
  expect_arity(args, 1, 1, 1, 2);
  dispatch_float(args, args.in[0].dtype, [&](auto tag) { maxpool_forward<decltype(tag)>(args); });
}

void maxpool2d_index_backward(const KernelArgs& args) {
  expect_arity(args, 2, 1);
  dispatch_float(args, args.in[1].dtype, [&](auto tag) { maxpool_index_backward<decltype(tag)>(args); });
}

void maxpool2d_backward(const KernelArgs& args) {
  run_float(args, 2, [&](auto tag) { maxpool_backward<decltype(tag)>(args); });
}

void avgpool2d(const KernelArgs& args) { run_float(args, 1, [&](auto tag) { avgpool_forward<decltype(tag)>(args); }); }

void avgpool2d_backward(const KernelArgs& args) {
  run_float(args, 1, [&](auto tag) { avgpool_backward<decltype(tag)>(args); });
}

void global_avgpool(const KernelArgs& args) {
  run_float(args, 1, [&](auto tag) { global_avgpool_forward<decltype(tag)>(args); });
}

void global_avgpool_backward(const KernelArgs& args) {
  run_float(args, 1, [&](auto tag) { global_avgpool_backward_t<decltype(tag)>(args); });
}

}  // namespace trident::cpu_ref
