// Inference: folds every batchnorm2d that directly follows a conv2d into that convolution,
// exactly (W' = W·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β):
//
//   conv2d(x, W, b?) ──► batchnorm2d(γ, β, μ, σ²)   ⇒   conv2d(x, W', b')
//   (the conv output has exactly one consumer; batchnorm in inference mode)
//
// The folded weights come from a fold_batchnorm node that reads only parameters and state,
// so the executable computes them once per weight update, not per step.
#include "core/error.h"
#include "passes/pass.h"
#include "passes/value_uses.h"
#include "ops/norm_params.h"

namespace trident::passes {

void fold_bn(ir::Graph& g, PassContext& ctx) {
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op == "batchnorm2d" && n.attrs.i("training", 1))
      throw Error("fold_bn needs an inference graph, but batchnorm '" + n.name +
                  "' is in training mode (batch statistics cannot be folded)");
  }
  const std::vector<int> order = g.order();
  for (int bn_id : order) {
    if (g.node(bn_id).op != "batchnorm2d") continue;
    const ir::Node bn = g.node(bn_id);
    const int producer = g.value(bn.inputs[0]).producer;
    if (producer < 0 || g.node(producer).op != "conv2d") {
      ctx.rejections.push_back({"fold_bn", "conv-bn", bn.name,
                                "the batchnorm's input is not a convolution output"});
      continue;
    }
    const ir::Node conv = g.node(producer);
    const size_t consumers = ValueUses(g).consumers(conv.outputs[0]);
    if (consumers != 1) {
      ctx.rejections.push_back({"fold_bn", "conv-bn", bn.name,
                                "the conv output '" + conv.name + "' has " + std::to_string(consumers) +
                                    " consumers, so the unnormalised value is still needed"});
      continue;
    }
    std::vector<int> fold_in{conv.inputs[1], bn.inputs[1], bn.inputs[2], bn.inputs[3], bn.inputs[4]};
    if (conv.inputs.size() == 3) fold_in.push_back(conv.inputs[2]);
    ir::Attrs fold_attrs;
    ops::NormParams::of(bn).copy_eps_to(fold_attrs);
    auto folded = g.add_node("fold_batchnorm", fold_in, fold_attrs, conv.name + ".fold");
    const int y = g.add_node1("conv2d", {conv.inputs[0], folded[0], folded[1]}, conv.attrs, conv.name);
    g.replace_uses(bn.outputs[0], y);
    const auto& cur = g.order();
    const size_t pos = static_cast<size_t>(std::find(cur.begin(), cur.end(), conv.id) - cur.begin());
    g.move_to(g.value(folded[0]).producer, pos);
    g.move_to(g.value(y).producer, pos + 1);
    g.remove_from_order({conv.id, bn.id});
    ctx.fusions.push_back({"fold_bn", "conv-bn", conv.name, {conv.name, bn.name}});
  }
}

}  // namespace trident::passes
