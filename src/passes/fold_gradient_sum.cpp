// Training, after autodiff: a gradient that arrives as a sum of two terms (a ResNet block's
// output feeds the next block's convolution and its shortcut) is added by the fused backward
// that reads it, instead of by an add that writes the sum for that backward to read twice.
//
//   dgrad(conv1) ─┐
//                 add ──► batchnorm_relu_backward    ⇒   batchnorm_relu_backward(dy, dy_other)
//   dresidual ────┘
//   (the sum has no other reader and is not a graph output; both terms have one shape and dtype)
//
// The backward rounds the sum to the activation dtype exactly as the add would, so the result
// is bitwise the one of the unfused graph. Each candidate add is folded or recorded with the
// reason it was refused.
#include <algorithm>

#include "ops/cbr_operands.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "grad-sum";
constexpr size_t kDy = ops::bn_relu_bwd_in::dy, kPlainInputs = ops::bn_relu_bwd_in::dy_other;

// Empty when the add feeding `bwd`'s dy may be folded into it, else the reason.
std::string refusal(const ir::Graph& g, const ValueUses& uses,
                    const ir::Node& add, const ir::Node& bwd) {
  const int sum = add.outputs[0];
  if (bwd.inputs.size() != kPlainInputs) return "the backward already adds a second gradient";
  if (uses.is_output(sum)) return "the sum '" + g.value(sum).name + "' is a graph output";
  if (uses.readers(sum).size() != 1) return "the sum '" + g.value(sum).name + "' has " + std::to_string(uses.readers(sum).size()) + " readers";
  if (std::count(bwd.inputs.begin(), bwd.inputs.end(), sum) != 1) return "the backward reads the sum twice";
  const ir::Value &a = g.value(add.inputs[0]), &b = g.value(add.inputs[1]), &s = g.value(sum);
  if (a.shape != s.shape || b.shape != s.shape) return "the add broadcasts";
  if (a.dtype != s.dtype || b.dtype != s.dtype) return "the add's terms and sum differ in dtype";
  return "";
}

}  // namespace

void fold_gradient_sum(ir::Graph& g, PassContext& ctx) {
  const std::vector<int> order = g.order();
  for (int id : order) {
    if (g.node(id).op != "batchnorm_relu_backward") continue;
    const int dy = g.node(id).inputs[kDy];
    const int producer = g.value(dy).producer;
    if (producer < 0 || g.node(producer).op != "add") continue;
    const ValueUses uses(g);
    const ir::Node add = g.node(producer);
    const std::string reason = refusal(g, uses, add, g.node(id));
    if (!reason.empty()) {
      ctx.rejections.push_back({"fold_gradient_sum", kPattern, add.name, reason});
      continue;
    }
    ir::Node& bwd = g.node(id);
    bwd.inputs[kDy] = add.inputs[0];
    bwd.inputs.push_back(add.inputs[1]);
    g.remove_from_order({add.id});
    ctx.fusions.push_back({"fold_gradient_sum", kPattern, bwd.name, {add.name, bwd.name}});
  }
}

}  // namespace trident::passes
