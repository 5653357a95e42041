// The pre-activation fusion (DenseNet, pre-activation ResNets): a batchnorm followed by a
// relu becomes one bn_relu node (ops/bn_relu.cpp), whose backward is one
// batchnorm_relu_backward. It runs after fuse_conv_bn_relu (training) and fold_bn (inference),
// so a convolution's own batchnorm goes to cbr/cbar or into the weights first (and is refused
// here when those are switched off).
//
//   x ──► batchnorm2d ──► relu ──► conv        ⇒   bn_relu ──► conv   "bn → relu → conv (pre-activation)"
//   x ──► batchnorm2d ──► relu ──► (other)     ⇒   bn_relu ──► …      "bn → relu"
//   (the batchnorm output and the relu output have exactly one consumer; training: the
//    batchnorm uses batch statistics)
//
// Every remaining batchnorm2d that a relu reads is a candidate: it is fused, or recorded with
// the reason (a batchnorm feeding only other ops, a projection shortcut's, is not this pattern).
#include <algorithm>

#include "ir/op_registry.h"
#include "ops/bn_relu_operands.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/value_uses.h"
#include "ops/norm_params.h"

namespace trident::passes {

namespace {

constexpr const char* kPass = "fuse_bn_relu";
constexpr const char* kPreActivation = "bn → relu → conv (pre-activation)";
constexpr const char* kPlain = "bn → relu";

struct Candidate {
  int bn = -1, relu = -1;
  bool feeds_conv = false;  // the relu output is the data input of a convolution
};

// Empty when legal, else the reason.
std::string match(const ir::Graph& g, const ValueUses& uses, const CompileOptions& options, int bn_id,
                  Candidate& c) {
  const bool training_graph = options.mode == Mode::Train;
  const ir::Node& bn = g.node(bn_id);
  c.bn = bn_id;
  // A convolution's own batchnorm is cbr's (training) or fold_bn's (inference), even where
  // that pass is switched off: its off switch then still means "unfused".
  const int conv = g.value(bn.inputs[0]).producer;
  if (conv >= 0 && g.node(conv).op == "conv2d" && uses.consumers(bn.inputs[0]) == 1)
    return training_graph ? "the batchnorm follows its convolution: that is conv → bn → relu (fuse_conv_bn_relu)"
                          : "the batchnorm follows its convolution, which fold_bn folds it into";
  const bool batch_statistics = bn.attrs.i("training", 1) != 0;
  if (training_graph && !batch_statistics)
    return "the batchnorm uses its running statistics in a training graph (no backward for that form)";
  if (!is_floating(g.value(bn.inputs[0]).dtype)) return "unsupported dtype";
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (uses.consumers(bn.outputs[i]) != 0)
      return "the batchnorm's statistics output '" + g.value(bn.outputs[i]).name + "' is read elsewhere";
  const int bn_out = bn.outputs[0];
  if (uses.consumers(bn_out) != 1)
    return "the batchnorm output '" + g.value(bn_out).name + "' has " +
           std::to_string(uses.consumers(bn_out)) + " consumers";
  const ir::Node& relu = g.node(uses.only_reader(bn_out));
  if (relu.op != "relu") return "the batchnorm output feeds '" + relu.name + "' (" + relu.op + "), not a relu";
  c.relu = relu.id;
  const int relu_out = relu.outputs[0];
  if (uses.consumers(relu_out) != 1)
    return "the relu output '" + g.value(relu_out).name + "' has " +
           std::to_string(uses.consumers(relu_out)) + " consumers";
  if (uses.only_reader(relu_out) >= 0) {
    const ir::Node& next = g.node(uses.only_reader(relu_out));
    c.feeds_conv = ir::OpRegistry::get(next.op).reads_conv_input && next.inputs[0] == relu_out;
  }
  if (!options.fuses_bn_relu()) return "the bn_relu fusion is turned off (bn_relu_fusion = 0)";
  return "";
}

// Every batchnorm that a relu reads is a candidate.
bool feeds_a_relu(const ir::Graph& g, const ValueUses& uses, int bn) {
  const std::vector<int>& readers = uses.readers(g.node(bn).outputs[0]);
  return std::any_of(readers.begin(), readers.end(), [&](int r) { return g.node(r).op == "relu"; });
}

std::string pattern_of(const Candidate& c) { return c.feeds_conv ? kPreActivation : kPlain; }

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node bn = g.node(c.bn);
  const ir::Node relu = g.node(c.relu);
  ir::Attrs attrs;
  ops::NormParams::of(bn).copy_to(attrs);
  attrs.set("training", int64_t{bn.attrs.i("training", 1) != 0});
  const std::string name = bn.name + ".bn_relu";
  const std::vector<int> outs = g.add_node("bn_relu", bn.inputs, attrs, name);
  g.replace_uses(relu.outputs[0], outs[ops::bn_relu_out::y]);
  // Where the relu ran: the relu's readers come after it, the batchnorm's inputs before.
  replace_nodes(g, {g.value(outs[ops::bn_relu_out::y]).producer}, c.relu, {c.bn, c.relu});
  return {kPass, c.feeds_conv ? kPreActivation : kPlain, name, {bn.name, relu.name}};
}

}  // namespace

void fuse_bn_relu(ir::Graph& g, PassContext& ctx) {
  const auto refusal = [&ctx](const ir::Graph& g, const ValueUses& uses, int bn, Candidate& c) {
    return match(g, uses, ctx.options, bn, c);
  };
  apply_chain_rule(g, ctx,
                   ChainRule<Candidate>{.pass = kPass,
                                        .anchor_op = "batchnorm2d",
                                        .candidate = feeds_a_relu,
                                        .refusal = refusal,
                                        .pattern = pattern_of,
                                        .build = build});
}

}  // namespace trident::passes
