// Appends the optimizer step: one sgd_update or adamw_update node over every parameter that has
// a gradient, with its state per parameter (SGD's momentum buffer; AdamW's first and second
// moments and one step count), zero-initialised, and the learning rate as an input, so a
// schedule changes it without recompiling.
#include "core/error.h"
#include "passes/pass.h"

namespace trident::passes {

std::string_view optimizer_kind_name(OptimizerKind k) { return k == OptimizerKind::AdamW ? "adamw" : "sgd"; }

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::Sgd;
  if (name == "adamw") return OptimizerKind::AdamW;
  throw Error("the optimizer must be sgd or adamw, not '" + name + "'");
}

bool is_optimizer_state_name(std::string_view name) {
  for (std::string_view suffix : {".momentum", ".exp_avg", ".exp_avg_sq"})
    if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
  return name == "adamw.step";
}

namespace {

// One zero-initialised state tensor per parameter, named after it.
std::vector<int> state_per_param(ir::Graph& g, const std::vector<int>& params, const std::string& suffix) {
  std::vector<int> out;
  for (int p : params)
    out.push_back(g.add_state(g.value(p).name + suffix, g.value(p).shape, {ir::Init::Zeros}, g.value(p).dtype));
  return out;
}

}  // namespace

void append_optimizer(ir::Graph& g, PassContext& ctx) {
  if (ctx.param_grads.empty()) throw Error("the model has no trainable parameters");
  const DType dtype = g.value(ctx.param_grads[0].first).dtype;
  const int lr = g.add_input("lr", {1}, dtype);
  std::vector<int> params, grads;
  for (auto [p, gp] : ctx.param_grads) {
    params.push_back(p);
    grads.push_back(gp);
  }
  std::vector<int> in{lr};
  in.insert(in.end(), params.begin(), params.end());
  in.insert(in.end(), grads.begin(), grads.end());
  const auto& o = ctx.options;
  ir::Attrs attrs{{"count", static_cast<int64_t>(params.size())}, {"weight_decay", o.weight_decay}};
  const bool adamw = o.optimizer_kind == OptimizerKind::AdamW;
  if (adamw) {
    for (const char* suffix : {".exp_avg", ".exp_avg_sq"})
      for (int s : state_per_param(g, params, suffix)) in.push_back(s);
    in.push_back(g.add_state("adamw.step", {1}, {ir::Init::Zeros}, dtype));
    attrs.set("beta1", o.beta1);
    attrs.set("beta2", o.beta2);
    attrs.set("eps", o.adam_eps);
  } else {
    for (int s : state_per_param(g, params, ".momentum")) in.push_back(s);
    attrs.set("momentum", o.momentum);
    attrs.set("nesterov", int64_t{o.nesterov});
  }
  if (ctx.loss_scale >= 0) {
    in.push_back(ctx.loss_scale);
    in.push_back(ctx.good_steps);
    attrs.set("loss_scaling", int64_t{1});
    attrs.set("growth_interval", o.loss_scale_growth_interval);
  }
  g.add_node(adamw ? "adamw_update" : "sgd_update", in, attrs, adamw ? "adamw" : "sgd");
}

}  // namespace trident::passes
