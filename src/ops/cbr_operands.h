// Where each operand of a fused CBR node sits. cbr, cbar and conv_bn_stats share one input
// layout — x, w, gamma, beta, running_mean, running_var, [residual (cbar)], [b],
// [x_affine (attribute prologue)], [residual_affine (cbar, attribute residual_affine)] — and
// one output layout, y (for conv_bn_stats: its affine),
// conv_out, saved_mean, saved_invstd, running_mean_out, running_var_out, [relu_mask]. The ops,
// the passes and every backend read positions from here instead of counting inputs.
#pragma once
#include <cstddef>

#include "ir/graph.h"

namespace trident::ops {

namespace cbr_in {
inline constexpr size_t x = 0, w = 1, gamma = 2, beta = 3, running_mean = 4, running_var = 5;
}
namespace cbr_out {
inline constexpr size_t y = 0, affine = 0, conv_out = 1, saved_mean = 2, saved_invstd = 3, running_mean = 4,
                        running_var = 5, relu_mask = 6;
}

struct CbrOperands {
  int residual = -1;  // input positions; -1 where the node has no such operand
  int bias = -1;
  int x_affine = -1;  // prologue: x is a raw convolution output, the conv reads relu(x·scale + shift)
  int residual_affine = -1;  // the residual is a raw convolution output, added as residual·scale + shift
};

inline bool has_prologue(const ir::Node& n) { return n.attrs.i("prologue", 0) != 0; }
inline bool has_residual_affine(const ir::Node& n) { return n.attrs.i("residual_affine", 0) != 0; }

inline CbrOperands cbr_operands(const ir::Node& n) {
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

}  // namespace trident::ops
