// Reference kernel of quantize_dequantize (ops/quantize.cpp): each value snapped to its int8
// grid with ops/int8_quant.h's arithmetic, the one the integer kernels use, and scaled back.
#include <algorithm>
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "ops/int8_quant.h"

namespace trident::cpu_ref {

namespace {

template <class T>
void snap(const T* x, T* y, int64_t n, float scale, ops::Int8Grid grid) {
  const float inverse = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(ops::int8_level(static_cast<float>(x[i]), inverse, grid) * scale);
}

template <class T>
void run(const KernelArgs& a) {
  const TensorView &x = a.in[0], &y = a.out[0];
  const T* in = x.as<const T>();
  T* out = y.as<T>();
  if (a.node.attrs.i("per_channel", 0) == 0) {
    const bool is_unsigned = a.node.attrs.i("unsigned", 0) != 0;
    const int zero_point = static_cast<int>(a.node.attrs.i("zero_point", 0));
    snap(in, out, x.numel(), static_cast<float>(a.node.attrs.f("scale", 1.0)), ops::int8_grid(is_unsigned, zero_point));
    return;
  }
  const int64_t K = x.shape[0], per = K > 0 ? x.numel() / K : 0;
  for (int64_t k = 0; k < K; ++k) {
    double absmax = 0;
    for (int64_t i = 0; i < per; ++i) absmax = std::max(absmax, std::fabs(static_cast<double>(in[k * per + i])));
    snap(in + k * per, out + k * per, per, ops::int8_scale(absmax, false), ops::kWeightGrid);
  }
}

}  // namespace

void quantize_dequantize(const KernelArgs& a) {
  switch (a.in[0].dtype) {
    case DType::f32: return run<float>(a);
    case DType::f64: return run<double>(a);
    default:
      throw Error("node '" + a.node.name + "' (quantize_dequantize): dtype " + std::string(dtype_name(a.in[0].dtype)) +
                  " is not supported by cpu_ref");
  }
}

}  // namespace trident::cpu_ref
