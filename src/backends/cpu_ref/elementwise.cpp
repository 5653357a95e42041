// Reference element-wise ops: relu, its backward, add, fill, and the flatten/reshape views.
// All are flat loops over the element count (shape is irrelevant); views only copy when the
// planner did not alias the output onto the input.
#include <cstring>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

void expect_same_shape(const KernelArgs& a, const TensorView& u, const TensorView& v,
                       const char* what) {
  if (u.shape != v.shape)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): " + what + " have shapes " +
                shape_str(u.shape) + " and " + shape_str(v.shape) + " but must match");
}

template <class T>
void relu_t(const KernelArgs& a) {
  expect_dtype(a, a.out[0], a.in[0].dtype, "y");
  expect_same_shape(a, a.in[0], a.out[0], "x and y");
  const T* x = a.in[0].as<T>();
  T* y = a.out[0].as<T>();
  const int64_t n = a.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <class T>
void relu_backward_t(const KernelArgs& a) {
  expect_dtype(a, a.in[1], a.in[0].dtype, "dy");
  expect_dtype(a, a.out[0], a.in[0].dtype, "dx");
  expect_same_shape(a, a.in[0], a.in[1], "y and dy");
  expect_same_shape(a, a.in[0], a.out[0], "y and dx");
  const T* y = a.in[0].as<T>();
  const T* dy = a.in[1].as<T>();
  T* dx = a.out[0].as<T>();
  const int64_t n = a.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <class T>
void add_t(const KernelArgs& a) {
  expect_dtype(a, a.in[1], a.in[0].dtype, "b");
  expect_dtype(a, a.out[0], a.in[0].dtype, "y");
  expect_same_shape(a, a.in[0], a.in[1], "a and b");
  expect_same_shape(a, a.in[0], a.out[0], "a and y");
  const T* x = a.in[0].as<T>();
  const T* z = a.in[1].as<T>();
  T* y = a.out[0].as<T>();
  const int64_t n = a.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
}

template <class T>
void fill_t(const TensorView& y, double value) {
  T* p = y.as<T>();
  const T v = static_cast<T>(value);
  const int64_t n = y.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

}  // namespace

void relu(const KernelArgs& args) { run_float(args, 1, [&](auto tag) { relu_t<decltype(tag)>(args); }); }

void relu_backward(const KernelArgs& args) {
  run_float(args, 2, [&](auto tag) { relu_backward_t<decltype(tag)>(args); });
}

void add(const KernelArgs& args) { run_float(args, 2, [&](auto tag) { add_t<decltype(tag)>(args); }); }

void fill(const KernelArgs& args) {
  expect_arity(args, 0, 1);
  const TensorView& y = args.out[0];
  const double value = args.node.attrs.f("value");
  if (y.dtype == DType::i32) {
    fill_t<int32_t>(y, value);
    return;
  }
  dispatch_float(args, y.dtype, [&](auto tag) { fill_t<decltype(tag)>(y, value); });
}

void view_copy(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  expect_dtype(args, y, x.dtype, "the output");
  if (x.numel() != y.numel())
    throw Error("node '" + args.node.name + "' (op " + args.node.op + "): output " +
                shape_str(y.shape) + " does not hold the same element count as input " +
                shape_str(x.shape));
  if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
}

}  // namespace trident::cpu_ref
