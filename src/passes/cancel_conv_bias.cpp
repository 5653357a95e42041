// Training: a convolution's bias right before a training batchnorm does nothing to the
// batchnorm's output — the batch mean subtracts it again — so the fused convolution runs
// without it. What the bias still changes is the running mean (it tracks the mean of the
// biased output), and its gradient is exactly zero, so weight decay and momentum still move
// it as they would unfused. Without the bias add, cuDNN's conv+genstats and prologue graphs
// serve the layer (VGG's convolutions carry biases):
//
//   cbr / cbar (x, w, …, b)        ⇒   cbr / cbar (x, w, …, b), bias_cancelled = 1
//     conv_out = conv(x, w) + b          conv_out = conv(x, w);  running_mean_out += momentum·b
//
// The attribute's meaning, and the decomposition every backend is tested against, are in
// ops/cbr_operands.h and ops/fused_cbr.cpp.
#include "ops/cbr_operands.h"
#include "passes/pass.h"

namespace trident::passes {

void cancel_conv_bias(ir::Graph& g, PassContext& ctx) {
  for (int id : g.order()) {
    ir::Node& n = g.node(id);
    if (n.op != "cbr" && n.op != "cbar") continue;
    const int bias = ops::CbrOperands::of(n).bias;
    if (bias < 0 || ops::has_cancelled_bias(n)) continue;
    n.attrs.set("bias_cancelled", int64_t{1});
    ctx.fusions.push_back({"cancel_conv_bias", "conv-bias-bn", n.name, {g.value(n.inputs[bias]).name}});
  }
}

}  // namespace trident::passes
