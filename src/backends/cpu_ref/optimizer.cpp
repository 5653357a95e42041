// Reference optimizer steps over every parameter tensor of the model at once, with PyTorch's
// semantics: sgd_update (weight decay, momentum, optional Nesterov) and adamw_update
// (torch.optim.AdamW: decoupled weight decay, bias-corrected moments). Outputs normally alias
// the parameter and state inputs; each element is read before it is written, so aliasing is
// safe. Loss scaling (unscale, skip an overflowed step) is shared: loss_scaling.h. Gradients
// in f16/bf16 beside f32 parameters (fold_gradient_cast) are widened first.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/loss_scaling.h"

namespace trident::cpu_ref {

namespace {

struct SgdStep {
  double lr, momentum, weight_decay;
  bool nesterov;
  double inv_scale = 1;  // 1 / loss scale
};

template <class T>
void sgd_tensor(const SgdStep& h, const TensorView& p_in, const TensorView& g_in,
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

// Every tensor of an optimizer's operands has parameter t's shape and dtype.
void expect_like_param(const KernelArgs& args, size_t t, const TensorView& p,
                       std::initializer_list<const TensorView*> others) {
  for (const TensorView* v : others) {
    if (v->shape != p.shape)
      throw Error("node '" + args.node.name + "' (" + args.node.op + "): parameter " + std::to_string(t) +
                  " has shape " + shape_str(p.shape) + " but its gradient, optimizer state or output has " +
                  shape_str(v->shape));
    expect_dtype(args, *v, p.dtype, "a gradient, optimizer state or output");
  }
}

// One AdamW step's scalars, from the learning rate and the step number t (1 at the first step).
struct AdamwStep {
  double decay;          // 1 − lr·weight_decay
  double beta1, beta2;
  double step_size;      // lr / (1 − beta1^t)
  double sqrt_bc2;       // √(1 − beta2^t)
  double eps;
  double inv_scale = 1;  // 1 / loss scale
};

template <class T>
void adamw_tensor(const AdamwStep& h, const TensorView& p_in, const TensorView& g_in, const TensorView& m_in,
                  const TensorView& v_in, const TensorView& p_out, const TensorView& m_out, const TensorView& v_out) {
  const T* P = p_in.as<T>();
  const T* G = g_in.as<T>();
  const T* Mi = m_in.as<T>();
  const T* Vi = v_in.as<T>();
  T* Po = p_out.as<T>();
  T* Mo = m_out.as<T>();
  T* Vo = v_out.as<T>();
  const T decay = static_cast<T>(h.decay), b2 = static_cast<T>(h.beta2), one_b1 = static_cast<T>(1 - h.beta1),
          one_b2 = static_cast<T>(1 - h.beta2), step_size = static_cast<T>(h.step_size),
          sqrt_bc2 = static_cast<T>(h.sqrt_bc2), eps = static_cast<T>(h.eps), inv = static_cast<T>(h.inv_scale);
  const bool unscale = h.inv_scale != 1;
  const int64_t n = p_in.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = unscale ? G[i] * inv : G[i];
    const T p = P[i] * decay;
    const T m = Mi[i] + one_b1 * (g - Mi[i]);  // torch's lerp towards g
    const T v = Vi[i] * b2 + one_b2 * g * g;
    Mo[i] = m;
    Vo[i] = v;
    Po[i] = p - step_size * (m / (std::sqrt(v) / sqrt_bc2 + eps));
  }
}

// The step's arguments with every gradient narrower than its parameter (f16/bf16 beside f32:
// passes/fold_gradient_cast.cpp) replaced by an f32 copy, widened by the cast kernel the fold
// removed, so the step and its overflow check read exactly what they read before.
class WidenedGradients {
 public:
  WidenedGradients(const KernelArgs& args, size_t first_param, size_t first_grad, size_t count) : args_(args) {
    copies_.reserve(count);
    for (size_t t = 0; t < count; ++t) {
      TensorView& grad = args_.in[first_grad + t];
      const DType to = args.in[first_param + t].dtype;
      if (grad.dtype == to) continue;
      copies_.emplace_back(static_cast<size_t>(grad.numel()) * dtype_size(to));
      const TensorView wide{copies_.back().data(), grad.shape, to};
      cast(KernelArgs{args.node, {grad}, {wide}});
      grad = wide;
    }
  }
  const KernelArgs& args() const { return args_; }

 private:
  KernelArgs args_;
  std::vector<std::vector<std::byte>> copies_;
};

void sgd_step(const KernelArgs& args) {
  const ops::SgdParams op = ops::sgd_params(args.node);
  const size_t n = op.count;
  SgdStep h{read_scalar(args, args.in[0], "the learning rate"), op.momentum, op.weight_decay, op.nesterov};
  const ScaledStep scaled = loss_scaled_step(args, op.scaling, op.grad(0), n, op.loss_scale(), op.loss_scale_out());
  if (scaled.skip) {
    std::vector<std::pair<size_t, size_t>> keep;
    for (size_t t = 0; t < n; ++t) keep.insert(keep.end(), {{t, op.param(t)}, {n + t, op.momentum_buffer(t)}});
    keep_inputs(args, keep);
    return;
  }
  h.inv_scale = scaled.inv_scale;
  for (size_t t = 0; t < n; ++t) {
    const TensorView& p = args.in[op.param(t)];
    const TensorView& g = args.in[op.grad(t)];
    const TensorView& m = args.in[op.momentum_buffer(t)];
    const TensorView& po = args.out[t];
    const TensorView& mo = args.out[n + t];
    expect_like_param(args, t, p, {&g, &m, &po, &mo});
    dispatch_float(args, p.dtype, [&](auto tag) { sgd_tensor<decltype(tag)>(h, p, g, m, po, mo); });
  }
}

void adamw_step(const KernelArgs& args) {
  const ops::AdamwParams op = ops::adamw_params(args.node);
  const size_t n = op.count;
  const double lr = read_scalar(args, args.in[0], "the learning rate");
  const double step = read_scalar(args, args.in[op.step()], "the step count");
  const ScaledStep scaled = loss_scaled_step(args, op.scaling, op.grad(0), n, op.loss_scale(), op.loss_scale_out());
  if (scaled.skip) {  // the step count stays: the step did not happen
    std::vector<std::pair<size_t, size_t>> keep{{op.step_out(), op.step()}};
    for (size_t t = 0; t < n; ++t)
      keep.insert(keep.end(),
                  {{op.param_out(t), op.param(t)}, {op.exp_avg_out(t), op.exp_avg(t)}, {op.exp_avg_sq_out(t), op.exp_avg_sq(t)}});
    keep_inputs(args, keep);
    return;
  }
  const double t_next = step + 1;
  const AdamwStep h{1 - lr * op.weight_decay,
                    op.beta1,
                    op.beta2,
                    lr / (1 - std::pow(op.beta1, t_next)),
                    std::sqrt(1 - std::pow(op.beta2, t_next)),
                    op.eps,
                    scaled.inv_scale};
  for (size_t t = 0; t < n; ++t) {
    const TensorView& p = args.in[op.param(t)];
    const TensorView& g = args.in[op.grad(t)];
    const TensorView& m = args.in[op.exp_avg(t)];
    const TensorView& v = args.in[op.exp_avg_sq(t)];
    const TensorView& po = args.out[op.param_out(t)];
    const TensorView& mo = args.out[op.exp_avg_out(t)];
    const TensorView& vo = args.out[op.exp_avg_sq_out(t)];
    expect_like_param(args, t, p, {&g, &m, &v, &po, &mo, &vo});
    dispatch_float(args, p.dtype, [&](auto tag) { adamw_tensor<decltype(tag)>(h, p, g, m, v, po, mo, vo); });
  }
  const TensorView& so = args.out[op.step_out()];
  dispatch_float(args, so.dtype, [&](auto tag) { so.as<decltype(tag)>()[0] = static_cast<decltype(tag)>(t_next); });
}

}  // namespace

void sgd_update(const KernelArgs& args) {
  const ops::SgdParams op = ops::sgd_params(args.node);
  expect_arity(args, op.inputs(), op.outputs());
  sgd_step(WidenedGradients(args, op.param(0), op.grad(0), op.count).args());
}

void adamw_update(const KernelArgs& args) {
  const ops::AdamwParams op = ops::adamw_params(args.node);
  expect_arity(args, op.inputs(), op.outputs());
  adamw_step(WidenedGradients(args, op.param(0), op.grad(0), op.count).args());
}

}  // namespace trident::cpu_ref
