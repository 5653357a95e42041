// Training fusion of the block trident exists for. Patterns (drawn here, matched by match()
// below, in order):
//
//   conv2d ──► batchnorm2d ──► relu                         ⇒   cbr
//   conv2d ──► batchnorm2d ──► clip(0, m)                   ⇒   cbr {relu_max m}   (ReLU6: m = 6)
//   conv2d ──► batchnorm2d ──► add(·, residual) ──► relu    ⇒   cbar
//   (each intermediate has exactly one consumer; batchnorm in training mode)
//
// Every candidate — a batchnorm2d fed by a conv2d — is either fused or recorded with the
// reason it was refused, for `trident explain`.
#include "ir/op_registry.h"
#include "ops/cbr_operands.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/relu_bound.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

struct Candidate {
  int conv = -1, bn = -1, add = -1, relu = -1;
  int residual = -1;
  double relu_max = 0;  // the bound of a clip(0, m) in the relu's place; 0: a plain relu
};

// Returns the empty string when legal, else the reason.
std::string match(const ir::Graph& g, const ValueUses& uses, int bn_id, Candidate& c) {
  const ir::Node& bn = g.node(bn_id);
  const int conv_out = bn.inputs[0];
  c.bn = bn_id;
  c.conv = g.value(conv_out).producer;
  if (!bn.attrs.i("training", 1)) return "the batchnorm is in inference mode (running statistics)";
  if (!is_floating(g.value(conv_out).dtype)) return "unsupported dtype";
  if (uses.only_reader(conv_out) < 0)
    return "the conv output '" + g.value(conv_out).name + "' has " + std::to_string(uses.consumers(conv_out)) +
           " consumers";
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (uses.consumers(bn.outputs[i]) != 0)
      return "the batchnorm's statistics output '" + g.value(bn.outputs[i]).name + "' is read elsewhere";
  const int bn_out = bn.outputs[0];
  if (uses.only_reader(bn_out) < 0)
    return "the batchnorm output has " + std::to_string(uses.consumers(bn_out)) + " consumers";
  const ir::Node& next = g.node(uses.only_reader(bn_out));
  int relu_in = bn_out;
  if (next.op == "add") {
    c.add = next.id;
    c.residual = next.inputs[0] == bn_out ? next.inputs[1] : next.inputs[0];
    if (c.residual == bn_out) return "the add reads the batchnorm output twice";
    relu_in = next.outputs[0];
    if (uses.only_reader(relu_in) < 0)
      return "the add output has " + std::to_string(uses.consumers(relu_in)) + " consumers";
  } else if (next.op != "relu" && relu_bound(next) == 0) {
    return "the batchnorm output feeds '" + next.name + "' (" + next.op + "), not a relu, a clip(0, m) or an add";
  }
  const ir::Node& relu = g.node(uses.only_reader(relu_in));
  if (relu.op != "relu" && c.add >= 0)
    return "the add output feeds '" + relu.name + "' (" + relu.op + "), not a relu" +
           (relu_bound(relu) > 0 ? " (a clipped relu after the residual add is not fused)" : "");
  c.relu = relu.id;
  c.relu_max = relu_bound(relu);
  return "";
}

// Every batchnorm whose input a conv2d produces is a candidate.
bool follows_a_convolution(const ir::Graph& g, const ValueUses&, int bn) {
  const int producer = g.value(g.node(bn).inputs[0]).producer;
  return producer >= 0 && g.node(producer).op == "conv2d";
}

std::string pattern_of(const Candidate& c) {
  return c.add >= 0 ? "conv-bn-add-relu" : c.relu_max > 0 ? "conv-bn-clip" : "conv-bn-relu";
}

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node conv = g.node(c.conv);
  const ir::Node bnode = g.node(c.bn);
  const ir::Node relu = g.node(c.relu);
  const bool cbar = c.add >= 0;
  ops::CbrParts parts = ops::cbr_parts(conv, bnode, cbar ? c.residual : -1);
  if (c.relu_max > 0) parts.attrs.set("relu_max", c.relu_max);
  // Named after the block: "layer1.0.conv1" + "+bn1+relu1" reads poorly; the conv's name
  // with its pattern suffix is unique and points at the source layer.
  const std::string name = conv.name + (cbar ? ".cbar" : ".cbr");
  const std::vector<int> outs = g.add_node(cbar ? "cbar" : "cbr", parts.inputs, parts.attrs, name);
  g.replace_uses(relu.outputs[0], outs[0]);
  // The fused node runs where the relu ran: every input (the residual too) exists by then.
  std::vector<int> gone{c.conv, c.bn, c.relu};
  if (cbar) gone.push_back(c.add);
  replace_nodes(g, {g.value(outs[0]).producer}, c.relu, gone);

  FusionRecord rec{"fuse_conv_bn_relu", pattern_of(c), name, {conv.name, bnode.name}};
  if (cbar) rec.nodes.push_back(g.node(c.add).name);
  rec.nodes.push_back(relu.name);
  return rec;
}

}  // namespace

void fuse_conv_bn_relu(ir::Graph& g, PassContext& ctx) {
  apply_chain_rule(g, ctx,
                   ChainRule<Candidate>{.pass = "fuse_conv_bn_relu",
                                        .anchor_op = "batchnorm2d",
                                        .candidate = follows_a_convolution,
                                        .refusal = match,
                                        .pattern = pattern_of,
                                        .build = build});
}

}  // namespace trident::passes
