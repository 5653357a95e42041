// The dynamic-loss-scaling half of an optimizer step on the reference backend, shared by
// sgd_update and adamw_update (ops::LossScaling): the overflow check of every gradient, the new
// scale and good-step count, and the skipped step that leaves the optimizer's outputs as they were.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "backends/kernel.h"
#include "ops/optimizer_params.h"

namespace trident::cpu_ref {

// One element of a [1] f32 or f64 tensor; `what` names it in the message.
double read_scalar(const KernelArgs& args, const TensorView& v, const char* what);

struct ScaledStep {
  bool skip = false;      // a gradient overflowed: change no parameter or optimizer state
  double inv_scale = 1;   // the gradients' multiplier: 1 / loss scale
};

// Without loss scaling: {false, 1}. With it: checks inputs [first_grad, first_grad + count) for an
// inf or NaN, reads the scale and good-step count at inputs `scale_in`, `scale_in + 1` and writes
// their next values to outputs `scale_out`, `scale_out + 1`.
ScaledStep loss_scaled_step(const KernelArgs& args, const ops::LossScaling& s, size_t first_grad, size_t count,
                            size_t scale_in, size_t scale_out);

// A skipped step: each (output, input) pair's output takes its input's values (nothing to do
// where they share storage, the in-place update).
void keep_inputs(const KernelArgs& args, const std::vector<std::pair<size_t, size_t>>& out_in);

}  // namespace trident::cpu_ref
