// Inference: the element-wise tail of a convolution joins the convolution's epilogue.
//
//   conv2d ──► relu                          ⇒   conv2d_epilogue {relu}
//   conv2d ──► clip(0, m)                    ⇒   conv2d_epilogue {relu, relu_max m}   (ReLU6: m = 6)
//   conv2d ──► add(·, residual) ──► relu     ⇒   conv2d_epilogue {residual, relu}
//   conv2d ──► add(·, residual) ──► clip(0, m) ⇒ conv2d_epilogue {residual, relu, relu_max m}
//   conv2d ──► add(·, residual)              ⇒   conv2d_epilogue {residual}
//   conv2d ──► [add(·, residual) ──►] activation f  ⇒  conv2d_epilogue {[residual,] activation f}
//   (each intermediate has exactly one consumer; f one the backend's epilogue takes, by its
//    traits: EfficientNet's SiLU, MobileNet v3's hardswish on the cpu backend)
//
// A conv2d with no element-wise consumer stays as it is (nothing to fuse: not a refusal);
// one whose output is read elsewhere is refused with the reason.
#include <cmath>

#include "ops/activation.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/relu_bound.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

struct Candidate {
  int conv = -1;
  std::string pattern;
  std::vector<int> group;  // the element-wise nodes joining the epilogue, in order
  int residual = -1;       // the add's other operand
  int tail = -1;           // the value the epilogue's output replaces
};

// Whether `n` is a point-wise op that may end the epilogue: a relu, a clip(0, m), or an
// activation the backend's epilogue takes.
bool ends_an_epilogue(const ir::Node& n, const ops::BackendTraits& traits) {
  if (n.op == "relu" || relu_bound(n) > 0) return true;
  return n.op == "activation" && traits.epilogue_takes(ops::activation_params(n.attrs).fn);
}

// The first reader of the conv output, when it is an op this epilogue takes; else -1.
int epilogue_start(const ir::Graph& g, const ValueUses& uses, const ops::BackendTraits& traits, int conv) {
  const std::vector<int>& readers = uses.readers(g.node(conv).outputs[0]);
  if (readers.empty()) return -1;
  const ir::Node& first = g.node(readers[0]);
  return first.op == "add" || ends_an_epilogue(first, traits) ? first.id : -1;
}

// "relu", "clip", "silu"... for the op that ends the epilogue.
std::string last_stage_name(const ir::Node& last) {
  if (last.op == "activation") return ops::activation_fn_name(ops::activation_params(last.attrs).fn);
  return last.op == "relu" ? "relu" : "clip";
}

std::string refusal(const ir::Graph& g, const ValueUses& uses, const ops::BackendTraits& traits, int conv_id,
                    Candidate& c) {
  const int y = g.node(conv_id).outputs[0];
  const ir::Node& first = g.node(epilogue_start(g, uses, traits, conv_id));
  c.conv = conv_id;
  c.pattern = first.op == "add" ? "conv-add-relu" : "conv-" + last_stage_name(first);
  if (uses.only_reader(y) < 0) return "the conv output has " + std::to_string(uses.consumers(y)) + " consumers";
  c.group = {first.id};
  c.tail = first.outputs[0];
  if (first.op == "add") {
    c.residual = first.inputs[0] == y ? first.inputs[1] : first.inputs[0];
    if (c.residual == y) return "the add reads the conv output twice";
    const int next = uses.only_reader(c.tail);
    if (next >= 0 && ends_an_epilogue(g.node(next), traits)) {
      c.group.push_back(next);
      c.tail = g.node(next).outputs[0];
    }
  }
  return "";
}

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node conv = g.node(c.conv);
  const ir::Node& last = g.node(c.group.back());
  const double relu_max = relu_bound(last);
  const bool relu = last.op == "relu" || relu_max > 0;
  ir::Attrs a = conv.attrs;
  a.set("has_bias", int64_t{conv.inputs.size() == 3});
  a.set("residual", int64_t{c.residual >= 0});
  a.set("relu", int64_t{relu});
  if (relu_max > 0) a.set("relu_max", relu_max);
  if (last.op == "activation") {
    const ops::ActivationParams p = ops::activation_params(last.attrs);
    a.set("activation", std::string(ops::activation_fn_name(p.fn)));
    a.set("activation_alpha", static_cast<double>(p.alpha));
    a.set("activation_beta", static_cast<double>(p.beta));
  }
  std::vector<int> in = conv.inputs;
  if (c.residual >= 0) in.push_back(c.residual);
  const int out = g.add_node1("conv2d_epilogue", in, a, conv.name + ".epilogue");
  g.replace_uses(c.tail, out);
  std::vector<int> gone = c.group;
  gone.push_back(conv.id);
  replace_nodes(g, {g.value(out).producer}, c.group.back(), gone);
  const bool ends = c.group.size() > 1 || last.op != "add";
  const std::string tail = ends ? last_stage_name(g.node(c.group.back())) : "";
  const std::string fused_pattern = c.residual >= 0 ? (ends ? "conv-add-" + tail : "conv-add") : "conv-" + tail;
  FusionRecord rec{"fuse_conv_epilogue", fused_pattern, conv.name + ".epilogue", {conv.name}};
  for (int id : c.group) rec.nodes.push_back(g.node(id).name);
  return rec;
}

}  // namespace

void fuse_conv_epilogue(ir::Graph& g, PassContext& ctx) {
  const ops::BackendTraits& traits = ctx.options.traits;
  apply_chain_rule(
      g, ctx,
      ChainRule<Candidate>{
          .pass = "fuse_conv_epilogue",
          .anchor_op = "conv2d",
          .candidate = [&](const ir::Graph& g, const ValueUses& uses,
                           int conv) { return epilogue_start(g, uses, traits, conv) >= 0; },
          .refusal = [&](const ir::Graph& g, const ValueUses& uses, int conv,
                         Candidate& c) { return refusal(g, uses, traits, conv, c); },
          .pattern = [](const Candidate& c) { return c.pattern; },
          .build = build});
}

}  // namespace trident::passes
