// Reading a fused batchnorm backward's stages from its node (ops/bn_relu_backward_stages.h).
#include "ops/bn_relu_backward_stages.h"

#include <sstream>

#include "core/error.h"
#include "ops/cbr_operands.h"

namespace trident::ops {

BnReluBackwardStages::Dy BnReluBackwardStages::dy_of(const ir::Node& n) {
  if (n.op == "cbr_weight_backward") return Dy::plain;
  if (n.op != "batchnorm_relu_backward")
    throw Error("'" + n.name + "' (" + n.op + ") is not a fused batchnorm backward");
  if (n.attrs.i("pooled_dy", 0) != 0) return Dy::pooled;
  return n.inputs.size() > bn_relu_bwd_in::dy_other ? Dy::plus_other : Dy::plain;
}

BnReluBackwardStages BnReluBackwardStages::of(const ir::Node& n, const ir::Graph& g) {
  BnReluBackwardStages s;
  s.dy = dy_of(n);
  const ir::Value& mask = g.value(n.inputs.at(bn_relu_bwd_in::mask));
  s.mask = mask.dtype == DType::i32 ? Mask::bits : mask.shape.size() == 2 ? Mask::affine : Mask::relu_output;
  s.clipped = n.attrs.has("relu_max");
  s.relu_max = n.attrs.f("relu_max", 0.0);
  s.residual_gradient = n.attrs.i("residual", 0) != 0;
  return s;
}

std::string BnReluBackwardStages::describe() const {
  std::ostringstream out;
  out << (dy == Dy::plus_other ? "dy + dy_other" : dy == Dy::pooled ? "dy routed through the max pooling" : "dy");
  out << " → " << (clipped ? "clip mask 0 < y < " : "relu mask");
  if (clipped) out << relu_max;
  out << (mask == Mask::bits ? " (packed bits)" : mask == Mask::affine ? " (y recomputed from the affine)" : " (from y)");
  if (residual_gradient) out << " → dresidual";
  out << " → batchnorm backward";
  return out.str();
}

}  // namespace trident::ops
