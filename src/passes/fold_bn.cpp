// Inference: folds every batchnorm2d that directly follows a conv2d into that convolution,
// exactly (W' = W·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β):
//
//   conv2d(x, W, b?) ──► batchnorm2d(γ, β, μ, σ²)   ⇒   conv2d(x, W', b')
//   (the conv output has exactly one consumer; batchnorm in inference mode)
//
// The folded weights come from a fold_batchnorm node that reads only parameters and state,
// so the executable computes them once per weight update, not per step.
#include "core/error.h"
#include "ops/norm_params.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

struct Candidate {
  int conv = -1, bn = -1;
};

std::string refusal(const ir::Graph& g, const ValueUses& uses, int bn_id, Candidate& c) {
  c.bn = bn_id;
  c.conv = g.value(g.node(bn_id).inputs[0]).producer;
  if (c.conv < 0 || g.node(c.conv).op != "conv2d") return "the batchnorm's input is not a convolution output";
  const ir::Node& conv = g.node(c.conv);
  const size_t consumers = uses.consumers(conv.outputs[0]);
  if (consumers != 1)
    return "the conv output '" + conv.name + "' has " + std::to_string(consumers) +
           " consumers, so the unnormalised value is still needed";
  return "";
}

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node conv = g.node(c.conv);
  const ir::Node bn = g.node(c.bn);
  std::vector<int> fold_in{conv.inputs[1], bn.inputs[1], bn.inputs[2], bn.inputs[3], bn.inputs[4]};
  if (conv.inputs.size() == 3) fold_in.push_back(conv.inputs[2]);
  ir::Attrs fold_attrs;
  ops::NormParams::of(bn).copy_eps_to(fold_attrs);
  const auto folded = g.add_node("fold_batchnorm", fold_in, fold_attrs, conv.name + ".fold");
  const int y = g.add_node1("conv2d", {conv.inputs[0], folded[0], folded[1]}, conv.attrs, conv.name);
  g.replace_uses(bn.outputs[0], y);
  replace_nodes(g, {g.value(folded[0]).producer, g.value(y).producer}, conv.id, {conv.id, bn.id});
  return {"fold_bn", "conv-bn", conv.name, {conv.name, bn.name}};
}

}  // namespace

void fold_bn(ir::Graph& g, PassContext& ctx) {
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op == "batchnorm2d" && n.attrs.i("training", 1))
      throw Error("fold_bn needs an inference graph, but batchnorm '" + n.name +
                  "' is in training mode (batch statistics cannot be folded)");
  }
  apply_chain_rule(g, ctx,
                   ChainRule<Candidate>{.pass = "fold_bn",
                                        .anchor_op = "batchnorm2d",
                                        .candidate = nullptr,
                                        .refusal = refusal,
                                        .pattern = [](const Candidate&) -> std::string { return "conv-bn"; },
                                        .build = build});
}

}  // namespace trident::passes
