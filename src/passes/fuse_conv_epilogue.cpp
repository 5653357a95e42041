// Inference: the element-wise tail of a convolution joins the convolution's epilogue.
//
//   conv2d ──► relu                          ⇒   conv2d_epilogue {relu}
//   conv2d ──► clip(0, m)                    ⇒   conv2d_epilogue {relu, relu_max m}   (ReLU6: m = 6)
//   conv2d ──► add(·, residual) ──► relu     ⇒   conv2d_epilogue {residual, relu}
//   conv2d ──► add(·, residual) ──► clip(0, m) ⇒ conv2d_epilogue {residual, relu, relu_max m}
//   conv2d ──► add(·, residual)              ⇒   conv2d_epilogue {residual}
//   (each intermediate has exactly one consumer)
//
// A conv2d with no element-wise consumer stays as it is (nothing to fuse: not a refusal);
// one whose output is read elsewhere is refused with the reason.
#include <cmath>

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

// The first reader of the conv output, when it is an op this epilogue takes; else -1.
int epilogue_start(const ir::Graph& g, const ValueUses& uses, int conv) {
  const std::vector<int>& readers = uses.readers(g.node(conv).outputs[0]);
  if (readers.empty()) return -1;
  const ir::Node& first = g.node(readers[0]);
  return first.op == "relu" || first.op == "add" || relu_bound(first) > 0 ? first.id : -1;
}

// A conv2d whose first reader is such an op is a candidate; any other is no refusal.
bool starts_an_epilogue(const ir::Graph& g, const ValueUses& uses, int conv) {
  return epilogue_start(g, uses, conv) >= 0;
}

std::string refusal(const ir::Graph& g, const ValueUses& uses, int conv_id, Candidate& c) {
  const int y = g.node(conv_id).outputs[0];
  const ir::Node& first = g.node(epilogue_start(g, uses, conv_id));
  c.conv = conv_id;
  c.pattern = first.op == "relu" ? "conv-relu" : relu_bound(first) > 0 ? "conv-clip" : "conv-add-relu";
  if (uses.only_reader(y) < 0) return "the conv output has " + std::to_string(uses.consumers(y)) + " consumers";
  c.group = {first.id};
  c.tail = first.outputs[0];
  if (first.op == "add") {
    c.residual = first.inputs[0] == y ? first.inputs[1] : first.inputs[0];
    if (c.residual == y) return "the add reads the conv output twice";
    const int next = uses.only_reader(c.tail);
    if (next >= 0 && (g.node(next).op == "relu" || relu_bound(g.node(next)) > 0)) {
      c.group.push_back(next);
      c.tail = g.node(next).outputs[0];
    }
  }
  return "";
}

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node conv = g.node(c.conv);
  const double relu_max = relu_bound(g.node(c.group.back()));
  const bool relu = g.node(c.group.back()).op == "relu" || relu_max > 0;
  ir::Attrs a = conv.attrs;
  a.set("has_bias", int64_t{conv.inputs.size() == 3});
  a.set("residual", int64_t{c.residual >= 0});
  a.set("relu", int64_t{relu});
  if (relu_max > 0) a.set("relu_max", relu_max);
  std::vector<int> in = conv.inputs;
  if (c.residual >= 0) in.push_back(c.residual);
  const int out = g.add_node1("conv2d_epilogue", in, a, conv.name + ".epilogue");
  g.replace_uses(c.tail, out);
  std::vector<int> gone = c.group;
  gone.push_back(conv.id);
  replace_nodes(g, {g.value(out).producer}, c.group.back(), gone);
  const std::string fused_pattern =
      !relu ? "conv-add" : relu_max > 0 && c.residual >= 0 ? "conv-add-clip" : c.pattern;
  FusionRecord rec{"fuse_conv_epilogue", fused_pattern, conv.name + ".epilogue", {conv.name}};
  for (int id : c.group) rec.nodes.push_back(g.node(id).name);
  return rec;
}

}  // namespace

void fuse_conv_epilogue(ir::Graph& g, PassContext& ctx) {
  apply_chain_rule(g, ctx,
                   ChainRule<Candidate>{.pass = "fuse_conv_epilogue",
                                        .anchor_op = "conv2d",
                                        .candidate = starts_an_epilogue,
                                        .refusal = refusal,
                                        .pattern = [](const Candidate& c) { return c.pattern; },
                                        .build = build});
}

}  // namespace trident::passes
