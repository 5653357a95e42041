// Loss scaling of the reference optimizers (loss_scaling.h): PyTorch's GradScaler rules, the
// scale in f32 or f64 as the graph holds it.
#include "backends/cpu_ref/loss_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu_ref/kernel_checks.h"

namespace trident::cpu_ref {

double read_scalar(const KernelArgs& a, const TensorView& v, const char* what) {
  if (v.numel() != 1)
    throw Error("node '" + a.node.name + "' (" + a.node.op + "): " + what + " has shape " + shape_str(v.shape) +
                " but a single element was expected");
  switch (v.dtype) {
    case DType::f32: return v.as<float>()[0];
    case DType::f64: return v.as<double>()[0];
    default: unsupported_dtype(a, v.dtype);
  }
}

ScaledStep loss_scaled_step(const KernelArgs& args, const ops::LossScaling& s, size_t first_grad, size_t count,
                            size_t scale_in, size_t scale_out) {
  if (!s.on) return {};
  const double scale = read_scalar(args, args.in[scale_in], "the loss scale");
  const double good = read_scalar(args, args.in[scale_in + 1], "the good-step count");
  bool finite = true;
  for (size_t t = 0; t < count && finite; ++t) {
    const TensorView& g = args.in[first_grad + t];
    dispatch_float(args, g.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* G = g.as<T>();
      for (int64_t i = 0; i < g.numel(); ++i)
        if (!std::isfinite(static_cast<double>(G[i]))) {
          finite = false;
          break;
        }
    });
  }
  double new_scale = scale, new_good = good + 1;
  if (!finite) {
    new_scale = std::max(1.0, scale / 2);
    new_good = 0;
  } else if (new_good >= static_cast<double>(s.growth_interval)) {
    new_scale = scale * 2;
    new_good = 0;
  }
  dispatch_float(args, args.out[scale_out].dtype, [&](auto tag) {
    using T = decltype(tag);
    args.out[scale_out].as<T>()[0] = static_cast<T>(new_scale);
    args.out[scale_out + 1].as<T>()[0] = static_cast<T>(new_good);
  });
  return {!finite, 1.0 / scale};
}

void keep_inputs(const KernelArgs& args, const std::vector<std::pair<size_t, size_t>>& out_in) {
  for (auto [o, i] : out_in)
    if (args.out[o].data != args.in[i].data) std::memcpy(args.out[o].data, args.in[i].data, args.in[i].bytes());
}

}  // namespace trident::cpu_ref
