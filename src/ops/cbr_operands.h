// Where each operand of a fused CBR node sits. cbr, cbar and conv_bn_stats share one input
// layout — x, w, gamma, beta, running_mean, running_var, [residual (cbar)], [b],
// [x_affine (attribute prologue)], [residual_affine (cbar, attribute residual_affine)] — and
// one output layout, y (for conv_bn_stats: its affine),
// conv_out, saved_mean, saved_invstd, running_mean_out, running_var_out, [relu_mask]; and
// their backward batchnorm_relu_backward has one layout too. The ops, the passes that build
// them and every backend read positions from here instead of counting inputs.
#pragma once
#include <cstddef>
#include <vector>

#include "ir/graph.h"
#include "ops/norm_params.h"

namespace trident::ops {

namespace cbr_in {
inline constexpr size_t x = 0, w = 1, gamma = 2, beta = 3, running_mean = 4, running_var = 5;
}
namespace cbr_out {
inline constexpr size_t y = 0, affine = 0, conv_out = 1, saved_mean = 2, saved_invstd = 3, running_mean = 4,
                        running_var = 5, relu_mask = 6;
}

// batchnorm_relu_backward: mask (y, its packed bits or the affine that recomputes y), dy,
// conv_out, gamma, saved_mean, saved_invstd, [dy_other] → dconv, dgamma, dbeta, [dresidual].
// With attribute pooled_dy = 1 (passes/fold_maxpool_gradient.cpp) dy is the gradient of a max
// pooling of y — the window in the node's pooling attributes, as maxpool2d_index_backward holds
// them — and the pooling's window index follows in dy_other's place; the backward routes dy to
// the cells the index names itself.
namespace bn_relu_bwd_in {
inline constexpr size_t mask = 0, dy = 1, conv_out = 2, gamma = 3, saved_mean = 4, saved_invstd = 5, dy_other = 6,
                        dy_window_index = 6;
}
namespace bn_relu_bwd_out {
inline constexpr size_t dconv = 0, dgamma = 1, dbeta = 2, dresidual = 3;
}
// cbr_weight_backward (passes/fuse_cbr_weight_backward.cpp): batchnorm_relu_backward's first
// six inputs, then the convolution's input x → dw, dgamma, dbeta.
namespace cbr_weight_bwd_in {
inline constexpr size_t mask = 0, dy = 1, conv_out = 2, gamma = 3, saved_mean = 4, saved_invstd = 5, x = 6;
}
namespace cbr_weight_bwd_out {
inline constexpr size_t dw = 0, dgamma = 1, dbeta = 2;
}
inline bool has_prologue(const ir::Node& n) { return n.attrs.i("prologue", 0) != 0; }
inline bool has_residual_affine(const ir::Node& n) { return n.attrs.i("residual_affine", 0) != 0; }
// Attribute bias_cancelled = 1 (passes/cancel_conv_bias.cpp): the batch mean cancels the
// convolution's bias b, so conv_out and saved_mean are those of the convolution without b, y
// is unchanged, the running mean takes the bias (running_mean_out + momentum·b) and b's
// gradient is exactly zero.
inline bool has_cancelled_bias(const ir::Node& n) { return n.attrs.i("bias_cancelled", 0) != 0; }

// The positions of a CBR node's optional inputs.
struct CbrOperands {
  int residual = -1;  // input positions; -1 where the node has no such operand
  int bias = -1;
  int x_affine = -1;  // prologue: x is a raw convolution output, the conv reads relu(x·scale + shift)
  int residual_affine = -1;  // the residual is a raw convolution output, added as residual·scale + shift

  static CbrOperands of(const ir::Node& n) {
    CbrOperands o;
    int next = 6;
    if (n.op == "cbar") o.residual = next++;
    const bool prologue = has_prologue(n), residual_affine = has_residual_affine(n);
    const int rest = static_cast<int>(n.inputs.size()) - next;
    if (rest == 1 + prologue + residual_affine) o.bias = next++;
    if (prologue) o.x_affine = next++;
    if (residual_affine) o.residual_affine = next++;
    return o;
  }
};

// The inputs and attributes of a CBR node fusing `conv` (conv2d: x, w, [b]) with `bn` (a
// training batchnorm2d: x, gamma, beta, running_mean, running_var), with cbar's `residual`
// (-1: none); the passes that build the family start from these.
struct CbrParts {
  std::vector<int> inputs;
  ir::Attrs attrs;
};
inline CbrParts cbr_parts(const ir::Node& conv, const ir::Node& bn, int residual = -1) {
  CbrParts p;
  p.inputs = {conv.inputs[0], conv.inputs[1], bn.inputs[1], bn.inputs[2], bn.inputs[3], bn.inputs[4]};
  if (residual >= 0) p.inputs.push_back(residual);
  if (conv.inputs.size() == 3) p.inputs.push_back(conv.inputs[2]);
  for (const auto& [k, v] : conv.attrs.items()) p.attrs.set(k, v);
  NormParams::of(bn).copy_to(p.attrs);
  return p;
}

}  // namespace trident::ops
