// Reference kernel of the inference fusions' own op: batchnorm folding as the formula of
// docs/OPS.md in f64 arithmetic. (conv2d_epilogue runs as its decomposition: decomposed.cpp.)
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "ops/norm_params.h"

namespace trident::cpu_ref {

namespace {

template <class T>
void fold(const KernelArgs& a) {
  const TensorView& w = a.in[0];
  const int64_t K = w.shape[0], per_k = w.numel() / K;
  const double eps = ops::NormParams::of(a.node).eps;
  const T *W = w.as<T>(), *gamma = a.in[1].as<T>(), *beta = a.in[2].as<T>(), *mean = a.in[3].as<T>(),
          *var = a.in[4].as<T>();
  const T* bias = a.in.size() == 6 ? a.in[5].as<T>() : nullptr;
  T *Wf = a.out[0].as<T>(), *Bf = a.out[1].as<T>();
  for (int64_t k = 0; k < K; ++k) {
    const double scale = static_cast<double>(gamma[k]) / std::sqrt(static_cast<double>(var[k]) + eps);
    for (int64_t i = 0; i < per_k; ++i) Wf[k * per_k + i] = static_cast<T>(W[k * per_k + i] * scale);
    const double b = bias ? static_cast<double>(bias[k]) : 0.0;
    Bf[k] = static_cast<T>((b - mean[k]) * scale + beta[k]);
  }
}

}  // namespace

void fold_batchnorm(const KernelArgs& a) {
  switch (a.in[0].dtype) {
    case DType::f32: return fold<float>(a);
    case DType::f64: return fold<double>(a);
    default:
      throw Error("node '" + a.node.name + "' (fold_batchnorm): dtype " +
                  std::string(dtype_name(a.in[0].dtype)) + " is not supported by cpu_ref");
  }
}

}  // namespace trident::cpu_ref
