// Reference kernel of the cross-layer fusion's piece bn_apply (ops/bn_apply.cpp): [relu]
// x·scale + shift, each step rounded, as the batchnorm kernel applies its affine
// (batchnorm_affine lives with the batchnorm kernels, whose statistics it shares). A weight
// gradient with a prologue runs as its decomposition, bn_apply then the plain one.
#include <algorithm>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

void expect_affine_of(const KernelArgs& a, const TensorView& affine, int64_t channels) {
  expect_dtype(a, affine, DType::f32, "the affine");
  if (affine.shape != Shape{2, channels})
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): the affine has shape " + shape_str(affine.shape) +
                " but must be [2," + std::to_string(channels) + "]");
}

template <class T>
void apply_t(const TensorView& x, const TensorView& affine, const TensorView& y, bool relu) {
  const int64_t C = x.shape.back(), rows = C > 0 ? x.numel() / C : 0;
  const float* scale = affine.as<const float>();
  const float* shift = scale + C;
  const T* in = x.as<const T>();
  T* out = y.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      // Two roundings, never one fused multiply-add: the GPU kernels round the same way.
      volatile T scaled = in[r * C + c] * static_cast<T>(scale[c]);
      const T v = scaled + static_cast<T>(shift[c]);
      out[r * C + c] = !relu || v > T(0) ? v : T(0);
    }
}

}  // namespace

void apply_bn(const KernelArgs& a, const TensorView& x, const TensorView& affine, const TensorView& y, bool relu) {
  expect_rank(a, x, 4, "x");
  expect_affine_of(a, affine, x.shape.back());
  if (y.shape != x.shape) throw Error("node '" + a.node.name + "' (op " + a.node.op + "): y must have x's shape");
  expect_dtype(a, y, x.dtype, "y");
  dispatch_float(a, x.dtype, [&](auto tag) { apply_t<decltype(tag)>(x, affine, y, relu); });
}

void bn_apply(const KernelArgs& a) {
  expect_arity(a, 2, 1);
  apply_bn(a, a.in[0], a.in[1], a.out[0], a.node.attrs.i("relu", 1) != 0);
}

}  // namespace trident::cpu_ref
