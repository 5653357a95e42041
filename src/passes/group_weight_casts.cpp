// Mixed-precision training, before autodiff: the casts of the f32 master weights to their
// f16/bf16 working copies become one cast_group node, where the first of them ran. A network's
// weights are many small tensors (ResNet-50: 54), and one launch each costs more than the bytes
// they move; the group is one launch, and its backward (autodiff) one more for the gradients.
//
//   w1 ─► cast ─► conv1   w2 ─► cast ─► conv2   …   ⇒   (w1, w2, …) ─► cast_group ─► conv1, conv2, …
//   (every cast reads a parameter and converts to the same dtype)
//
// The copies then live from the start of the step rather than from their first reader: the
// size of the weights once more in the working dtype at most.
#include <algorithm>

#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace trident::passes {

void group_weight_casts(ir::Graph& g, PassContext& ctx) {
  std::vector<int> casts, weights;
  std::string dtype;
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op != "cast" || g.value(n.inputs[0]).role != ir::ValueRole::Parameter) continue;
    if (dtype.empty()) dtype = n.attrs.s("dtype");
    if (n.attrs.s("dtype") != dtype) {
      ctx.rejections.push_back({"group_weight_casts", "cast-group", n.name, "it casts to " + n.attrs.s("dtype") +
                                                                                 ", the group to " + dtype});
      continue;
    }
    casts.push_back(id);
    weights.push_back(n.inputs[0]);
  }
  if (casts.size() < 2) return;
  const std::vector<int> copies = g.add_node("cast_group", weights, {{"dtype", dtype}}, "weights." + dtype);
  const int group = g.value(copies[0]).producer;
  FusionRecord rec{"group_weight_casts", "cast-group", g.node(group).name, {}};
  for (size_t i = 0; i < casts.size(); ++i) {
    const ir::Node& cast = g.node(casts[i]);
    g.value(copies[i]).name = g.value(cast.outputs[0]).name;
    g.value(cast.outputs[0]).name += ".ungrouped";
    g.replace_uses(cast.outputs[0], copies[i]);
    rec.nodes.push_back(cast.name);
  }
  replace_nodes(g, {group}, casts[0], casts);
  ctx.fusions.push_back(std::move(rec));
}

}  // namespace trident::passes
