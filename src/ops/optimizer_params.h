// The optimizer ops' settings and operand layout (sgd_update, adamw_update), parsed once from a
// node's attributes into typed structs that the op's shape rules and every backend's kernel
// read; the dynamic loss scaling of fp16 training is one struct both optimizers share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ir/graph.h"

namespace trident::ops {

// The optimizer steps, as one class passes ask about (each reads every parameter gradient and
// updates the parameters in place): sgd_update, adamw_update.
bool is_optimizer_op(std::string_view op);

// PyTorch's GradScaler rules: gradients arrive multiplied by the loss scale S; a step whose
// gradients hold an inf or NaN changes nothing but halves S (not below 1); otherwise the
// gradients are divided by S, and S doubles after `growth_interval` good steps in a row. The
// scale and the good-step count are the optimizer node's last two inputs and outputs.
struct LossScaling {
  bool on = false;
  int64_t growth_interval = 2000;
  size_t operands() const { return on ? 2 : 0; }
};
LossScaling loss_scaling_params(const ir::Node& n);

// sgd_update: lr, then `count` each of params, grads and momentum buffers [, scale, good steps];
// outputs params and momentum buffers [, scale, good steps].
struct SgdParams {
  size_t count = 0;
  double momentum = 0, weight_decay = 0;
  bool nesterov = false;
  LossScaling scaling;
  size_t param(size_t t) const { return 1 + t; }
  size_t grad(size_t t) const { return 1 + count + t; }
  size_t momentum_buffer(size_t t) const { return 1 + 2 * count + t; }
  size_t loss_scale() const { return 1 + 3 * count; }  // then the good-step count
  size_t inputs() const { return 1 + 3 * count + scaling.operands(); }
  size_t outputs() const { return 2 * count + scaling.operands(); }
  size_t loss_scale_out() const { return 2 * count; }
};
SgdParams sgd_params(const ir::Node& n);

// adamw_update (torch.optim.AdamW): lr, then `count` each of params, grads, first moments
// (exp_avg) and second moments (exp_avg_sq), the step count (one f32) [, scale, good steps];
// outputs params, exp_avg, exp_avg_sq, the step count [, scale, good steps]. A skipped step
// leaves the step count as it was, as GradScaler skips optimizer.step().
struct AdamwParams {
  size_t count = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  LossScaling scaling;
  size_t param(size_t t) const { return 1 + t; }
  size_t grad(size_t t) const { return 1 + count + t; }
  size_t exp_avg(size_t t) const { return 1 + 2 * count + t; }
  size_t exp_avg_sq(size_t t) const { return 1 + 3 * count + t; }
  size_t step() const { return 1 + 4 * count; }
  size_t loss_scale() const { return 2 + 4 * count; }
  size_t inputs() const { return 2 + 4 * count + scaling.operands(); }
  size_t param_out(size_t t) const { return t; }
  size_t exp_avg_out(size_t t) const { return count + t; }
  size_t exp_avg_sq_out(size_t t) const { return 2 * count + t; }
  size_t step_out() const { return 3 * count; }
  size_t loss_scale_out() const { return 3 * count + 1; }
  size_t outputs() const { return 3 * count + 1 + scaling.operands(); }
};
// Throws an Error sentence for a count below 1 or a setting out of range (betas in [0, 1),
// eps > 0, weight decay ≥ 0).
AdamwParams adamw_params(const ir::Node& n);

}  // namespace trident::ops
