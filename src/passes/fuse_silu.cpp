// PyTorch exports SiLU (EfficientNet's activation, x·sigmoid(x)) as Mul(x, Sigmoid(x)), and the
// ONNX importer keeps the pair. As two nodes it writes the sigmoid into a tensor nothing else
// reads and reads x twice; as one activation node (fn silu) it is one pass, and a convolution's
// epilogue can take it. In f32 the two forms are the same bits: both round σ(x) to f32 and then
// x·σ(x) (ops/activation_math.h); in f16 and bf16 the fused form rounds once instead of twice.
//
//   x ──► activation(sigmoid) ──► mul(x, ·)     ⇒   activation(silu)   "x·sigmoid(x) → silu"
//   (the mul reads x and the sigmoid's output, either way round, of one shape; the sigmoid's
//    output has no other reader; neither is a graph output)
//
// Every sigmoid whose output a mul multiplies with the sigmoid's own input is a candidate (a
// squeeze-excitation gate, x·σ(s) with s another value, is not this pattern).
#include "ops/activation.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

constexpr const char* kPass = "fuse_silu";
constexpr const char* kPattern = "x·sigmoid(x) → silu";

struct Candidate {
  int sigmoid = -1, mul = -1;
};

bool is_sigmoid(const ir::Node& n) {
  return n.op == "activation" && ops::activation_params(n.attrs).fn == ops::ActivationFn::sigmoid;
}

// The mul reading both the sigmoid's output and its input, or -1.
int gating_mul(const ir::Graph& g, const ValueUses& uses, const ir::Node& sigmoid) {
  const int x = sigmoid.inputs[0], s = sigmoid.outputs[0];
  for (int r : uses.readers(s)) {
    const ir::Node& n = g.node(r);
    if (n.op == "mul" && n.inputs.size() == 2 &&
        ((n.inputs[0] == x && n.inputs[1] == s) || (n.inputs[0] == s && n.inputs[1] == x)))
      return r;
  }
  return -1;
}

bool multiplies_its_input(const ir::Graph& g, const ValueUses& uses, int id) {
  return is_sigmoid(g.node(id)) && gating_mul(g, uses, g.node(id)) >= 0;
}

std::string refusal(const ir::Graph& g, const ValueUses& uses, int id, Candidate& c) {
  const ir::Node& sigmoid = g.node(id);
  c.sigmoid = id;
  c.mul = gating_mul(g, uses, sigmoid);
  const ir::Value& s = g.value(sigmoid.outputs[0]);
  if (uses.consumers(s.id) != 1)
    return "the sigmoid's output '" + s.name + "' has " + std::to_string(uses.consumers(s.id)) + " consumers";
  const ir::Value& y = g.value(g.node(c.mul).outputs[0]);
  if (y.shape != g.value(sigmoid.inputs[0]).shape) return "the mul broadcasts: its output is not x's shape";
  if (uses.is_output(s.id) || uses.is_output(y.id))
    return "'" + (uses.is_output(s.id) ? s.name : y.name) + "' is a graph output, whose name the fusion would change";
  return "";
}

FusionRecord build(ir::Graph& g, const Candidate& c) {
  const ir::Node sigmoid = g.node(c.sigmoid), mul = g.node(c.mul);
  ir::Attrs attrs;
  attrs.set("fn", std::string("silu"));
  const std::string name = mul.name + ".silu";
  const int y = g.add_node1("activation", {sigmoid.inputs[0]}, attrs, name);
  g.replace_uses(mul.outputs[0], y);
  replace_nodes(g, {g.value(y).producer}, c.mul, {c.sigmoid, c.mul});
  return {kPass, kPattern, name, {sigmoid.name, mul.name}};
}

}  // namespace

void fuse_silu(ir::Graph& g, PassContext& ctx) {
  apply_chain_rule(g, ctx,
                   ChainRule<Candidate>{.pass = kPass,
                                        .anchor_op = "activation",
                                        .candidate = multiplies_its_input,
                                        .refusal = refusal,
                                        .pattern = [](const Candidate&) { return std::string(kPattern); },
                                        .build = build});
}

}  // namespace trident::passes
