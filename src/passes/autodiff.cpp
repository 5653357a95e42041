// Reverse-mode differentiation at graph level: walks the forward nodes backwards, asks each
// op's backward rule for its input gradients, and sums gradients of values read twice.
// Gradients are tracked only for values that depend on a parameter; rules still emit the
// gradient of every input, and dead-code elimination removes the unread ones (the data
// input's, which is how the first convolution loses its dgrad).
#include "core/error.h"
#include "ir/op_registry.h"
#include "passes/pass.h"

namespace trident::passes {

void autodiff(ir::Graph& g, PassContext& ctx) {
  if (ctx.loss < 0) throw Error("autodiff needs a loss; run attach_loss first");
  const std::vector<int> forward = g.order();

  std::vector<char> needs_grad(g.num_values(), 0);
  for (int p : g.values_with_role(ir::ValueRole::Parameter)) needs_grad[p] = 1;
  for (int nid : forward) {
    const ir::Node& n = g.node(nid);
    bool any = false;
    for (int in : n.inputs) any = any || needs_grad[in];
    if (any && ir::OpRegistry::get(n.op).backward)
      for (int out : n.outputs) needs_grad[out] = 1;
  }

  std::vector<int> grad(g.num_values(), -1);
  if (ctx.options.uses_loss_scaling()) {
    // The backward pass starts from the loss scale itself: every gradient comes out scaled.
    const DType t = g.value(ctx.loss).dtype;
    ctx.loss_scale = g.add_state("amp.loss_scale", {1}, {ir::Init::Constant, 1, ctx.options.initial_loss_scale}, t);
    ctx.good_steps = g.add_state("amp.good_steps", {1}, {ir::Init::Zeros}, t);
    grad.resize(g.num_values(), -1);
    grad[ctx.loss] = ctx.loss_scale;
  } else {
    grad[ctx.loss] = g.add_node1("fill", {}, {{"shape", Shape{1}}, {"value", 1.0},
                                              {"dtype", std::string(dtype_name(g.value(ctx.loss).dtype))}},
                                 "loss.seed");
  }

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const ir::Node n = g.node(*it);  // a copy: rules add nodes, which may move the node table
    std::vector<int> dys;
    bool any = false;
    for (int out : n.outputs) {
      dys.push_back(out < static_cast<int>(grad.size()) ? grad[out] : -1);
      any = any || dys.back() >= 0;
    }
    if (!any) continue;
    const ir::OpDef& def = ir::OpRegistry::get(n.op);
    if (!def.backward) throw Error("op '" + n.op + "' (node '" + n.name + "') has no backward rule");
    std::vector<int> dxs = def.backward(g, n, dys);
    grad.resize(g.num_values(), -1);
    for (size_t i = 0; i < n.inputs.size() && i < dxs.size(); ++i) {
      const int in = n.inputs[i], dx = dxs[i];
      if (dx < 0 || !needs_grad[in]) continue;
      grad[in] = grad[in] < 0 ? dx
                              : g.add_node1("add", {grad[in], dx}, {}, g.value(in).name + ".grad_sum");
      grad.resize(g.num_values(), -1);
    }
  }

  ctx.param_grads.clear();
  for (int p : g.values_with_role(ir::ValueRole::Parameter))
    if (grad[p] >= 0) ctx.param_grads.push_back({p, grad[p]});
  if (!ctx.options.optimizer) {
    std::vector<int> outs = g.outputs();
    for (auto [p, gp] : ctx.param_grads) outs.push_back(gp);
    g.set_outputs(outs);
  }
}

}  // namespace trident::passes
