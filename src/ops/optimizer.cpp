// The optimizer steps: sgd_update and adamw_update, each one node that steps every parameter,
// so the optimizer is one kernel over the flat parameter, gradient and state buffers.
// Parameters and optimizer state update in place (outputs alias their inputs); the operand
// layout and settings are ops/optimizer_params.h. Gradients may be f16/bf16 beside f32
// parameters (fold_gradient_cast).
#include <functional>

#include "ops/op_helpers.h"
#include "ops/optimizer_params.h"

namespace trident::ops {

namespace {

// The loss scale and good-step count, inputs from `first`: two [1] values, passed through.
void infer_loss_scaling(const Node& n, const Graph& g, const LossScaling& s, size_t first,
                        std::vector<TypeInfo>& out) {
  for (size_t i = 0; i < s.operands(); ++i) {
    const auto& v = in_value(g, n, first + i);
    if (v.shape != Shape{1}) throw Error("the loss scale and good-step count must have shape [1]");
    out.push_back({v.shape, v.dtype});
  }
}

void expect_input_count(const Node& n, size_t expected, const std::string& layout) {
  if (n.inputs.size() != expected)
    throw Error("expects " + std::to_string(expected) + " inputs (" + layout + "), not " +
                std::to_string(n.inputs.size()));
}

// A gradient has its parameter's shape and dtype, or is f16/bf16 beside an f32 parameter: the weight
// gradient of mixed-precision training read without its f32 copy (passes/fold_gradient_cast.cpp),
// which the optimizer widens exactly as the cast would.
void expect_gradient_of(const ir::Value& param, const ir::Value& grad) {
  if (grad.shape != param.shape)
    throw Error("parameter and gradient: shapes differ, " + shape_str(param.shape) + " ('" + param.name + "') vs " +
                shape_str(grad.shape) + " ('" + grad.name + "')");
  if (grad.dtype == param.dtype) return;
  if (param.dtype == DType::f32 && (grad.dtype == DType::f16 || grad.dtype == DType::bf16)) return;
  throw Error("the gradient '" + grad.name + "' is " + std::string(dtype_name(grad.dtype)) + " beside the " +
              std::string(dtype_name(param.dtype)) + " parameter '" + param.name + "'");
}

// A per-parameter state buffer of an optimizer: where its i-th tensor sits among the inputs,
// and its name in messages ("momentum", "first moment").
struct StateBuffer {
  std::function<size_t(size_t)> slot;
  const char* what;
};

// The checks every optimizer step shares — its input count, lr [1], each gradient beside its
// parameter, each state buffer of the parameter's shape — and the parameters' types, the
// step's first `count` outputs.
std::vector<TypeInfo> infer_parameters(const Node& n, const Graph& g, size_t inputs, const std::string& layout,
                                       size_t count, const std::function<size_t(size_t)>& param,
                                       const std::function<size_t(size_t)>& grad, const std::vector<StateBuffer>& states) {
  expect_input_count(n, inputs, layout);
  if (in_value(g, n, 0).shape != Shape{1}) throw Error("lr must have shape [1]");
  std::vector<TypeInfo> out;
  for (size_t i = 0; i < count; ++i) {
    const auto& value = in_value(g, n, param(i));
    expect_gradient_of(value, in_value(g, n, grad(i)));
    for (const StateBuffer& s : states)
      expect_same_shape(value, in_value(g, n, s.slot(i)), std::string("parameter and ") + s.what);
    out.push_back({value.shape, value.dtype});
  }
  return out;
}

void register_sgd() {
  ir::OpDef sgd;
  sgd.name = "sgd_update";
  sgd.inputs = {"lr", "params...", "grads...", "momentum...", "loss_scale?", "good_steps?"};
  sgd.outputs = {"params_out...", "momentum_out...", "loss_scale_out?", "good_steps_out?"};
  sgd.variadic = true;
  sgd.summary = "SGD with momentum, weight decay and optional Nesterov, in place; with "
                "loss_scaling, gradients are unscaled and an overflowed step is skipped";
  sgd.infer = [](const Node& n, const Graph& g) {
    const SgdParams p = sgd_params(n);
    std::vector<TypeInfo> out = infer_parameters(
        n, g, p.inputs(),
        std::string("lr, params, grads, momentum buffers") + (p.scaling.on ? ", loss scale and good-step count" : ""),
        p.count, [&](size_t i) { return p.param(i); }, [&](size_t i) { return p.grad(i); },
        {{[&](size_t i) { return p.momentum_buffer(i); }, "momentum"}});
    for (size_t i = 0; i < p.count; ++i) out.push_back(out[i]);
    infer_loss_scaling(n, g, p.scaling, p.loss_scale(), out);
    return out;
  };
  sgd.aliases = [](const Node& n) {
    const SgdParams p = sgd_params(n);
    std::vector<std::pair<int, int>> a;
    for (size_t i = 0; i < p.count; ++i) a.push_back({int(i), int(p.param(i))});
    for (size_t i = 0; i < p.count; ++i) a.push_back({int(p.count + i), int(p.momentum_buffer(i))});
    for (size_t i = 0; i < p.scaling.operands(); ++i) a.push_back({int(p.loss_scale_out() + i), int(p.loss_scale() + i)});
    return a;
  };
  sgd.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(sgd);
}

void register_adamw() {
  ir::OpDef adamw;
  adamw.name = "adamw_update";
  adamw.inputs = {"lr", "params...", "grads...", "exp_avg...", "exp_avg_sq...", "step", "loss_scale?", "good_steps?"};
  adamw.outputs = {"params_out...", "exp_avg_out...", "exp_avg_sq_out...", "step_out", "loss_scale_out?",
                   "good_steps_out?"};
  adamw.variadic = true;
  adamw.summary = "AdamW (decoupled weight decay, bias-corrected moments, torch.optim.AdamW), in place; "
                  "with loss_scaling, gradients are unscaled and an overflowed step is skipped";
  adamw.infer = [](const Node& n, const Graph& g) {
    const AdamwParams p = adamw_params(n);
    std::vector<TypeInfo> out = infer_parameters(
        n, g, p.inputs(),
        std::string("lr, params, grads, first and second moments, step count") +
            (p.scaling.on ? ", loss scale and good-step count" : ""),
        p.count, [&](size_t i) { return p.param(i); }, [&](size_t i) { return p.grad(i); },
        {{[&](size_t i) { return p.exp_avg(i); }, "first moment"}, {[&](size_t i) { return p.exp_avg_sq(i); }, "second moment"}});
    for (size_t i = 0; i < 2 * p.count; ++i) out.push_back(out[i % p.count]);
    const auto& step = in_value(g, n, p.step());
    if (step.shape != Shape{1}) throw Error("the step count must have shape [1]");
    out.push_back({step.shape, step.dtype});
    infer_loss_scaling(n, g, p.scaling, p.loss_scale(), out);
    return out;
  };
  adamw.aliases = [](const Node& n) {
    const AdamwParams p = adamw_params(n);
    std::vector<std::pair<int, int>> a;
    for (size_t i = 0; i < p.count; ++i) {
      a.push_back({int(p.param_out(i)), int(p.param(i))});
      a.push_back({int(p.exp_avg_out(i)), int(p.exp_avg(i))});
      a.push_back({int(p.exp_avg_sq_out(i)), int(p.exp_avg_sq(i))});
    }
    a.push_back({int(p.step_out()), int(p.step())});
    for (size_t i = 0; i < p.scaling.operands(); ++i) a.push_back({int(p.loss_scale_out() + i), int(p.loss_scale() + i)});
    return a;
  };
  adamw.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(adamw);
}

}  // namespace

void register_optimizer_ops() {
  register_sgd();
  register_adamw();
}

}  // namespace trident::ops
