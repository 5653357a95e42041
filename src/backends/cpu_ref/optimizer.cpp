// Reference SGD step (PyTorch semantics: weight decay, momentum, optional Nesterov) over
// every parameter tensor of the model at once. Outputs normally alias the parameter and
// momentum inputs; each element is read before it is written, so aliasing is safe.
// With loss_scaling, gradients arrive multiplied by the loss scale S: a step whose gradients
// hold an inf or NaN changes no parameter and halves S; otherwise gradients are divided by S,
// and S doubles after `growth_interval` good steps in a row (PyTorch's GradScaler rules).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

struct SgdHyper {
  double lr, momentum, weight_decay;
  bool nesterov;
  double inv_scale = 1;  // 1 / loss scale
};

template <class T>
void sgd_tensor(const SgdHyper& h, const TensorView& p_in, const TensorView& g_in,
                const TensorView& m_in, const TensorView& p_out, const TensorView& m_out) {
  const T* P = p_in.as<T>();
  const T* G = g_in.as<T>();
  const T* Mi = m_in.as<T>();
  T* Po = p_out.as<T>();
  T* Mo = m_out.as<T>();
  const T lr = static_cast<T>(h.lr), mu = static_cast<T>(h.momentum),
          wd = static_cast<T>(h.weight_decay), inv = static_cast<T>(h.inv_scale);
  const bool nesterov = h.nesterov;
  const int64_t n = p_in.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T p = P[i];
    const T g = (h.inv_scale == 1 ? G[i] : G[i] * inv) + wd * p;
    const T m = mu * Mi[i] + g;
    Mo[i] = m;
    Po[i] = p - lr * (nesterov ? g + mu * m : m);
  }
}

double read_scalar(const KernelArgs& a, const TensorView& v) {
  if (v.numel() != 1)
    throw Error("node '" + a.node.name + "' (sgd_update): the learning rate has shape " +
                shape_str(v.shape) + " but a single element was expected");
  switch (v.dtype) {
    case DType::f32: return v.as<float>()[0];
    case DType::f64: return v.as<double>()[0];
    default: unsupported_dtype(a, v.dtype);
  }
}

}  // namespace

void sgd_update(const KernelArgs& args) {
  const int64_t count = args.node.attrs.i("count");
  if (count < 0) throw Error("node '" + args.node.name + "' (sgd_update): count must be >= 0");
  const size_t n = static_cast<size_t>(count);
  const bool scaling = args.node.attrs.i("loss_scaling", 0) != 0;
  expect_arity(args, 1 + 3 * n + (scaling ? 2 : 0), 2 * n + (scaling ? 2 : 0));
  SgdHyper h{read_scalar(args, args.in[0]), args.node.attrs.f("momentum", 0.0),
             args.node.attrs.f("weight_decay", 0.0), args.node.attrs.i("nesterov", 0) != 0};
  if (scaling) {
    const double scale = read_scalar(args, args.in[1 + 3 * n]);
    const double good = read_scalar(args, args.in[2 + 3 * n]);
    bool finite = true;
    for (size_t t = 0; t < n && finite; ++t)
      dispatch_float(args, args.in[1 + n + t].dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* G = args.in[1 + n + t].as<T>();
        for (int64_t i = 0; i < args.in[1 + n + t].numel(); ++i)
          if (!std::isfinite(static_cast<double>(G[i]))) {
            finite = false;
            break;
          }
      });
    const int64_t interval = args.node.attrs.i("growth_interval", 2000);
    double new_scale = scale, new_good = good + 1;
    if (!finite) {
      new_scale = std::max(1.0, scale / 2);
      new_good = 0;
    } else if (new_good >= static_cast<double>(interval)) {
      new_scale = scale * 2;
      new_good = 0;
    }
    dispatch_float(args, args.out[2 * n].dtype, [&](auto tag) {
      using T = decltype(tag);
      args.out[2 * n].as<T>()[0] = static_cast<T>(new_scale);
      args.out[2 * n + 1].as<T>()[0] = static_cast<T>(new_good);
    });
    if (!finite) {  // skip the step: outputs keep the inputs' values
      for (size_t t = 0; t < 2 * n; ++t) {
        const TensorView& src = args.in[t < n ? 1 + t : 1 + 2 * n + (t - n)];
        if (args.out[t].data != src.data) std::memcpy(args.out[t].data, src.data, src.bytes());
      }
      return;
    }
    h.inv_scale = 1.0 / scale;
  }
  for (size_t t = 0; t < n; ++t) {
    const TensorView& p = args.in[1 + t];
    const TensorView& g = args.in[1 + n + t];
    const TensorView& m = args.in[1 + 2 * n + t];
    const TensorView& po = args.out[t];
    const TensorView& mo = args.out[n + t];
    for (const TensorView* v : {&g, &m, &po, &mo}) {
      if (v->shape != p.shape)
        throw Error("node '" + args.node.name + "' (sgd_update): parameter " + std::to_string(t) +
                    " has shape " + shape_str(p.shape) + " but its gradient, momentum or output has " +
                    shape_str(v->shape));
      expect_dtype(args, *v, p.dtype, "a gradient, momentum buffer or output");
    }
    dispatch_float(args, p.dtype, [&](auto tag) { sgd_tensor<decltype(tag)>(h, p, g, m, po, mo); });
  }
}

}  // namespace trident::cpu_ref
