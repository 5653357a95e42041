// Reference fully connected layer y = x·wᵀ + b ([N,I] × [O,I]) and its data/weight grads.
// Row-major x and w both have I contiguous, so the forward is a dot product per (n, o) and
// the backward passes are row axpys; each output row belongs to one thread.
#include <algorithm>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

struct LinearDims {
  int64_t N, I, O;
};

LinearDims linear_dims(const KernelArgs& a, const TensorView& x, const TensorView& w,
                       const TensorView& y) {
  expect_rank(a, x, 2, "x");
  expect_rank(a, w, 2, "w");
  expect_rank(a, y, 2, "y");
  const LinearDims d{x.shape[0], x.shape[1], w.shape[0]};
  if (w.shape[1] != d.I || y.shape[0] != d.N || y.shape[1] != d.O)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): shapes x" +
                shape_str(x.shape) + " w" + shape_str(w.shape) + " y" + shape_str(y.shape) +
                " do not agree");
  expect_dtype(a, w, x.dtype, "w");
  expect_dtype(a, y, x.dtype, "y");
  return d;
}

template <class T>
void linear_forward(const KernelArgs& a) {
  const LinearDims d = linear_dims(a, a.in[0], a.in[1], a.out[0]);
  const bool has_bias = a.in.size() == 3;
  if (has_bias) expect_dtype(a, a.in[2], a.in[0].dtype, "b");
  const T* X = a.in[0].as<T>();
  const T* Wt = a.in[1].as<T>();
  const T* B = has_bias ? a.in[2].as<T>() : nullptr;
  T* Y = a.out[0].as<T>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t o = 0; o < d.O; ++o) {
      const T* xr = X + n * d.I;
      const T* wr = Wt + o * d.I;
      T acc = B ? B[o] : T(0);
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < d.I; ++i) acc += xr[i] * wr[i];
      Y[n * d.O + o] = acc;
    }
}

// dx[n,:] = Σ_o dy[n,o]·w[o,:]
template <class T>
void linear_backward_data_t(const KernelArgs& a) {
  const TensorView &dy = a.in[0], &w = a.in[1], &dx = a.out[0];
  const LinearDims d = linear_dims(a, dx, w, dy);
  const T* DY = dy.as<T>();
  const T* Wt = w.as<T>();
  T* DX = dx.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < d.N; ++n) {
    T* dxr = DX + n * d.I;
    std::fill(dxr, dxr + d.I, T(0));
    for (int64_t o = 0; o < d.O; ++o) {
      const T g = DY[n * d.O + o];
      const T* wr = Wt + o * d.I;
#pragma omp simd
      for (int64_t i = 0; i < d.I; ++i) dxr[i] += g * wr[i];
    }
  }
}

// dw[o,:] = Σ_n dy[n,o]·x[n,:], db[o] = Σ_n dy[n,o]
template <class T>
void linear_backward_weight_t(const KernelArgs& a) {
  const TensorView &x = a.in[0], &dy = a.in[1], &dw = a.out[0];
  const LinearDims d = linear_dims(a, x, dw, dy);
  const bool has_bias = a.out.size() == 2;
  if (has_bias != (a.node.attrs.i("has_bias", has_bias ? 1 : 0) != 0))
    throw Error("node '" + a.node.name + "' (op " + a.node.op +
                "): attribute has_bias disagrees with the number of outputs");
  if (has_bias) {
    expect_dtype(a, a.out[1], x.dtype, "db");
    if (a.out[1].shape != Shape{d.O})
      throw Error("node '" + a.node.name + "' (op " + a.node.op + "): db has shape " +
                  shape_str(a.out[1].shape) + " but [" + std::to_string(d.O) + "] was expected");
  }
  const T* X = x.as<T>();
  const T* DY = dy.as<T>();
  T* DW = dw.as<T>();
  T* DB = has_bias ? a.out[1].as<T>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < d.O; ++o) {
    T* dwr = DW + o * d.I;
    std::fill(dwr, dwr + d.I, T(0));
    double db = 0.0;
    for (int64_t n = 0; n < d.N; ++n) {
      const T g = DY[n * d.O + o];
      db += g;
      const T* xr = X + n * d.I;
#pragma omp simd
      for (int64_t i = 0; i < d.I; ++i) dwr[i] += g * xr[i];
    }
    if (DB) DB[o] = static_cast<T>(db);
  }
}

}  // namespace

void linear(const KernelArgs& args) {
  expect_arity(args, 2, 3, 1, 1);
  dispatch_float(args, args.in[0].dtype, [&](auto tag) { linear_forward<decltype(tag)>(args); });
}

void linear_backward_data(const KernelArgs& args) {
  run_float(args, 2, [&](auto tag) { linear_backward_data_t<decltype(tag)>(args); });
}

void linear_backward_weight(const KernelArgs& args) {
  expect_arity(args, 2, 2, 1, 2);
  dispatch_float(args, args.in[0].dtype,
                 [&](auto tag) { linear_backward_weight_t<decltype(tag)>(args); });
}

}  // namespace trident::cpu_ref
