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

#include "passes/pass.h"
#include "passes/relu_bound.h"
#include "passes/value_uses.h"

namespace trident::passes {

void fuse_conv_epilogue(ir::Graph& g, PassContext& ctx) {
  const std::vector<int> order = g.order();
  for (int conv_id : order) {
    if (g.node(conv_id).op != "conv2d") continue;
    const ir::Node conv = g.node(conv_id);
    const ValueUses uses(g);
    const int y = conv.outputs[0];
    if (uses.readers(y).empty()) continue;
    const ir::Node& first = g.node(uses.readers(y)[0]);
    const bool clip_first = relu_bound(first) > 0;
    if (first.op != "relu" && first.op != "add" && !clip_first) continue;
    const std::string pattern = first.op == "relu" ? "conv-relu" : clip_first ? "conv-clip" : "conv-add-relu";
    if (uses.only_reader(y) < 0) {
      ctx.rejections.push_back({"fuse_conv_epilogue", pattern, conv.name,
                                "the conv output has " + std::to_string(uses.consumers(y)) + " consumers"});
      continue;
    }
    std::vector<int> group{first.id};
    int residual = -1, tail = first.outputs[0];
    if (first.op == "add") {
      residual = first.inputs[0] == y ? first.inputs[1] : first.inputs[0];
      if (residual == y) {
        ctx.rejections.push_back({"fuse_conv_epilogue", pattern, conv.name, "the add reads the conv output twice"});
        continue;
      }
      const int next = uses.only_reader(tail);
      if (next >= 0 && (g.node(next).op == "relu" || relu_bound(g.node(next)) > 0)) {
        group.push_back(next);
        tail = g.node(next).outputs[0];
      }
    }
    const double relu_max = relu_bound(g.node(group.back()));
    const bool relu = g.node(group.back()).op == "relu" || relu_max > 0;
    ir::Attrs a = conv.attrs;
    a.set("has_bias", int64_t{conv.inputs.size() == 3});
    a.set("residual", int64_t{residual >= 0});
    a.set("relu", int64_t{relu});
    if (relu_max > 0) a.set("relu_max", relu_max);
    std::vector<int> in = conv.inputs;
    if (residual >= 0) in.push_back(residual);
    const int out = g.add_node1("conv2d_epilogue", in, a, conv.name + ".epilogue");
    g.replace_uses(tail, out);
    const auto& cur = g.order();
    const size_t pos = static_cast<size_t>(std::find(cur.begin(), cur.end(), group.back()) - cur.begin());
    g.move_to(g.value(out).producer, pos);
    std::vector<int> gone = group;
    gone.push_back(conv.id);
    g.remove_from_order(gone);
    const std::string fused_pattern = !relu ? "conv-add" : relu_max > 0 && residual >= 0 ? "conv-add-clip" : pattern;
    FusionRecord rec{"fuse_conv_epilogue", fused_pattern, conv.name + ".epilogue", {conv.name}};
    for (int id : group) rec.nodes.push_back(g.node(id).name);
    ctx.fusions.push_back(std::move(rec));
  }
}

}  // namespace trident::passes
