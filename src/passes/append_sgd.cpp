// Appends the optimizer step: one sgd_update node over every parameter that has a gradient,
// with a momentum buffer per parameter (state, zero-initialised) and the learning rate as an
// input, so a schedule changes it without recompiling.
#include "core/error.h"
#include "passes/pass.h"

namespace trident::passes {

void append_sgd(ir::Graph& g, PassContext& ctx) {
  if (ctx.param_grads.empty()) throw Error("the model has no trainable parameters");
  const int lr = g.add_input("lr", {1}, g.value(ctx.param_grads[0].first).dtype);
  std::vector<int> params, grads, moms;
  for (auto [p, gp] : ctx.param_grads) {
    params.push_back(p);
    grads.push_back(gp);
    moms.push_back(g.add_state(g.value(p).name + ".momentum", g.value(p).shape, {ir::Init::Zeros},
                               g.value(p).dtype));
  }
  std::vector<int> in{lr};
  in.insert(in.end(), params.begin(), params.end());
  in.insert(in.end(), grads.begin(), grads.end());
  in.insert(in.end(), moms.begin(), moms.end());
  const auto& o = ctx.options;
  ir::Attrs attrs{{"count", static_cast<int64_t>(params.size())}, {"momentum", o.momentum},
                  {"weight_decay", o.weight_decay}, {"nesterov", int64_t{o.nesterov}}};
  if (ctx.loss_scale >= 0) {
    in.push_back(ctx.loss_scale);
    in.push_back(ctx.good_steps);
    attrs.set("loss_scaling", int64_t{1});
    attrs.set("growth_interval", o.loss_scale_growth_interval);
  }
  g.add_node("sgd_update", in, attrs, "sgd");
}

}  // namespace trident::passes
