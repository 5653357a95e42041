// Reference kernels of the packed ReLU mask (core/relu_mask.h): relu_mask packs y > 0 into
// bits, relu_mask_backward lets dy through where the bit is set. The fused reference kernels
// call the same two helpers, so a fused op and its decomposition share one definition.
#include <cstdint>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "core/relu_mask.h"

namespace trident::cpu_ref {

namespace {

void expect_mask_of(const KernelArgs& a, const TensorView& mask, const TensorView& act) {
  expect_dtype(a, mask, DType::i32, "mask");
  if (mask.shape != relu_mask_shape(act.shape))
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): the mask has shape " + shape_str(mask.shape) +
                " but must be " + shape_str(relu_mask_shape(act.shape)));
}

template <class T>
void pack_t(const TensorView& y, const TensorView& mask) {
  const int64_t C = y.shape.back(), words = relu_mask_words(C), rows = C > 0 ? y.numel() / C : 0;
  const T* v = y.as<T>();
  auto* m = mask.as<uint32_t>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < words; ++w) {
      uint32_t bits = 0;
      for (int64_t c = w * 32; c < C && c < (w + 1) * 32; ++c)
        if (v[r * C + c] > T(0)) bits |= uint32_t{1} << (c % 32);
      m[r * words + w] = bits;
    }
}

template <class T>
void apply_t(const TensorView& mask, const TensorView& dy, const TensorView& dx) {
  const int64_t C = dy.shape.back(), words = relu_mask_words(C), rows = C > 0 ? dy.numel() / C : 0;
  const auto* m = mask.as<const uint32_t>();
  const T* g = dy.as<const T>();
  T* out = dx.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const bool on = (m[r * words + c / 32] >> (c % 32)) & 1u;
      out[r * C + c] = on ? g[r * C + c] : T(0);
    }
}

}  // namespace

void pack_relu_mask(const KernelArgs& a, const TensorView& y, const TensorView& mask) {
  expect_mask_of(a, mask, y);
  dispatch_float(a, y.dtype, [&](auto tag) { pack_t<decltype(tag)>(y, mask); });
}

void apply_relu_mask(const KernelArgs& a, const TensorView& mask, const TensorView& dy, const TensorView& dx) {
  expect_mask_of(a, mask, dy);
  expect_dtype(a, dx, dy.dtype, "dx");
  dispatch_float(a, dy.dtype, [&](auto tag) { apply_t<decltype(tag)>(mask, dy, dx); });
}

void relu_mask(const KernelArgs& a) {
  expect_arity(a, 1, 1);
  pack_relu_mask(a, a.in[0], a.out[0]);
}

void relu_mask_backward(const KernelArgs& a) {
  expect_arity(a, 2, 1);
  apply_relu_mask(a, a.in[0], a.in[1], a.out[0]);
}

}  // namespace trident::cpu_ref
