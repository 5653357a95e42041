// Mixed-precision training, after the optimizer is appended: the optimizer reads the f16/bf16
// weight gradients themselves and widens them as it loads them, instead of reading f32 copies
// that the backward of the weights' cast (one cast_group after group_weight_casts) writes.
//
//   dW1, dW2, … (f16) ──► cast_group (f32) ──► sgd_update    ⇒   dW1, dW2, … (f16) ──► sgd_update
//   (every output of the cast is read by the optimizer alone, once, and is no graph output)
//
// One launch and, per parameter, an f32 write and read fewer; the f32 copies never exist.
// Widening f16 or bf16 to f32 is exact, so the step is bit for bit the unfused one (the
// overflow check of loss scaling reads the same values). Runs where the backend's optimizer
// takes narrow gradients (cuda, cpu_ref); a cast it cannot fold is recorded with the reason.
#include <algorithm>
#include <map>

#include "ops/optimizer_params.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "gradient-cast";

// The optimizer's gradient input positions, by parameter.
std::vector<size_t> gradient_positions(const ir::Node& optimizer) {
  std::vector<size_t> at;
  if (optimizer.op == "adamw_update") {
    const ops::AdamwParams p = ops::adamw_params(optimizer);
    for (size_t t = 0; t < p.count; ++t) at.push_back(p.grad(t));
  } else {
    const ops::SgdParams p = ops::sgd_params(optimizer);
    for (size_t t = 0; t < p.count; ++t) at.push_back(p.grad(t));
  }
  return at;
}

// Empty when every output of `cast` may be replaced by its input in the optimizer, else why not.
std::string refusal(const ir::Graph& g, const ValueUses& uses,
                    const ir::Node& cast, int optimizer) {
  for (size_t k = 0; k < cast.outputs.size(); ++k) {
    const ir::Value &from = g.value(cast.inputs[k]), &to = g.value(cast.outputs[k]);
    if (to.dtype != DType::f32 || (from.dtype != DType::f16 && from.dtype != DType::bf16))
      return "it casts " + std::string(dtype_name(from.dtype)) + " to " + std::string(dtype_name(to.dtype)) +
             ", not f16 or bf16 to f32";
    if (uses.is_output(cast.outputs[k])) return "the gradient '" + to.name + "' is a graph output";
    if (uses.readers(cast.outputs[k]) != std::vector<int>{optimizer}) return "the gradient '" + to.name + "' has another reader";
    if (std::count(g.node(optimizer).inputs.begin(), g.node(optimizer).inputs.end(), cast.outputs[k]) != 1)
      return "the optimizer reads the gradient '" + to.name + "' twice";
  }
  return "";
}

}  // namespace

void fold_gradient_cast(ir::Graph& g, PassContext& ctx) {
  int optimizer = -1;
  for (int id : g.order())
    if (ops::is_optimizer_op(g.node(id).op)) optimizer = id;
  if (optimizer < 0) return;
  const std::vector<size_t> positions = gradient_positions(g.node(optimizer));
  // The casts writing the optimizer's gradients, each once, in the order of the gradients.
  std::vector<int> casts;
  for (size_t at : positions) {
    const int producer = g.value(g.node(optimizer).inputs[at]).producer;
    if (producer < 0) continue;
    const std::string& op = g.node(producer).op;
    if ((op == "cast" || op == "cast_group") && std::find(casts.begin(), casts.end(), producer) == casts.end())
      casts.push_back(producer);
  }
  const ValueUses uses(g);
  for (int id : casts) {
    const ir::Node cast = g.node(id);
    const std::string reason = refusal(g, uses, cast, optimizer);
    if (!reason.empty()) {
      ctx.rejections.push_back({"fold_gradient_cast", kPattern, cast.name, reason});
      continue;
    }
    std::map<int, int> narrow;  // each f32 copy → the gradient it was cast from
    for (size_t k = 0; k < cast.outputs.size(); ++k) narrow[cast.outputs[k]] = cast.inputs[k];
    ir::Node& step = g.node(optimizer);
    for (size_t at : positions)
      if (auto it = narrow.find(step.inputs[at]); it != narrow.end()) step.inputs[at] = it->second;
    g.remove_from_order({id});
    ctx.fusions.push_back({"fold_gradient_cast", kPattern, step.name, {cast.name, step.name}});
  }
}

}  // namespace trident::passes
