// Inference: a conv2d_epilogue whose residual is read by nobody after it writes its output
// into the residual's buffer (attribute inplace_residual, which makes the op alias output 0
// onto that input). The oneDNN kernel then accumulates the convolution onto the residual in
// place instead of copying it first. Runs last, when no pass will move a reader any more.
#include "ir/op_registry.h"
#include "passes/pass.h"

namespace trident::passes {

void reuse_residual_buffer(ir::Graph& g, PassContext&) {
  const auto users = g.users();
  const auto& order = g.order();
  std::vector<int> position(g.num_nodes(), -1);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  for (int id : order) {
    ir::Node& n = g.node(id);
    if (n.op != "conv2d_epilogue" || !n.attrs.i("residual", 0)) continue;
    const int r = n.inputs.back();
    const ir::Value& rv = g.value(r);
    // Only an activation: not an input, weight or graph output, not a view of another tensor
    // (a chain of in-place epilogues is fine: each checks its own residual's readers), not
    // read twice by this node, and read by nobody later.
    if (rv.role != ir::ValueRole::Activation || rv.producer < 0) continue;
    const ir::Node& producer = g.node(rv.producer);
    if (ir::OpRegistry::get(producer.op).view) continue;
    if (std::find(g.outputs().begin(), g.outputs().end(), r) != g.outputs().end()) continue;
    if (std::count(n.inputs.begin(), n.inputs.end(), r) != 1) continue;
    bool last = true;
    for (int u : users[r]) last = last && (u == id || position[u] < position[id]);
    if (last) n.attrs.set("inplace_residual", int64_t{1});
  }
}

}  // namespace trident::passes
