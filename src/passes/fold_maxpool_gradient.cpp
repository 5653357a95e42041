// Training, after save_maxpool_index: the batchnorm backward of the layer a max pooling reads
// routes the pooling's gradient itself, through the window index, instead of reading the
// full-size gradient that maxpool2d_index_backward would write for it.
//
//   index, dpooled ──► maxpool2d_index_backward ──► dy ──► batchnorm_relu_backward
//     ⇒   batchnorm_relu_backward(dy = dpooled, window index; attribute pooled_dy, the window)
//   (the windows tile the input: stride = window, no padding, so a cell lies in one window at
//   most; dy has no other reader and is not a graph output; the backward adds no second gradient)
//
// The full-size dy is then neither written nor read twice (the backward's two passes each
// read the pooled gradient and its index: a quarter of the elements under VGG's 2×2 windows,
// plus a byte each). Overlapping windows (ResNet's 3×3 stride-2 stem pooling) are refused: each
// cell's gradient would be gathered from up to four windows in each of the two passes, more
// reads than the written gradient costs. The backward gathers each cell's gradient exactly as
// the pooling's backward does (same terms, same order, one rounding), so the result is the
// unfused graph's bit for bit. Each candidate is folded or recorded with the reason it was refused.
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"
#include "ops/window.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "maxpool-grad";

// Empty when the pooling backward `route` may be folded into its reader `bwd`, else the reason.
std::string refusal(const ir::Graph& g, const ValueUses& uses,
                    const ir::Node& route, const ir::Node& bwd) {
  const int dy = route.outputs[0];
  const ops::Window w = ops::pool_window(route.attrs);
  if (w.stride.h != w.kernel.h || w.stride.w != w.kernel.w || w.pad.h != 0 || w.pad.w != 0)
    return "its windows overlap or are padded, so each cell would gather from several windows in both passes";
  using Dy = ops::BnReluBackwardStages::Dy;
  const Dy given = ops::BnReluBackwardStages::dy_of(bwd);
  if (given == Dy::plus_other) return "the backward also adds a second gradient";
  if (given == Dy::pooled) return "the backward already routes a pooled gradient";
  if (uses.is_output(dy)) return "the gradient '" + g.value(dy).name + "' is a graph output";
  if (uses.readers(dy).size() != 1) return "the gradient '" + g.value(dy).name + "' has " + std::to_string(uses.readers(dy).size()) + " readers";
  if (g.value(route.inputs[1]).dtype != g.value(dy).dtype) return "the pooled gradient and the routed one differ in dtype";
  if (g.value(dy).shape != g.value(bwd.inputs[ops::bn_relu_bwd_in::conv_out]).shape)
    return "the routed gradient does not have the conv output's shape";
  return "";
}

// The maxpool2d_index_backward writing one of `bwd`'s incoming gradients (dy, or dy_other
// where fold_gradient_sum gave it two); -1 when neither comes from one.
int pooling_backward_of(const ir::Graph& g, const ir::Node& bwd) {
  namespace in = ops::bn_relu_bwd_in;
  std::vector<size_t> slots{in::dy};
  if (ops::BnReluBackwardStages::dy_of(bwd) == ops::BnReluBackwardStages::Dy::plus_other) slots.push_back(in::dy_other);
  for (size_t slot : slots) {
    const int producer = g.value(bwd.inputs[slot]).producer;
    if (producer >= 0 && g.node(producer).op == "maxpool2d_index_backward") return producer;
  }
  return -1;
}

}  // namespace

void fold_maxpool_gradient(ir::Graph& g, PassContext& ctx) {
  namespace in = ops::bn_relu_bwd_in;
  const std::vector<int> order = g.order();
  for (int id : order) {
    if (g.node(id).op != "batchnorm_relu_backward") continue;
    const int producer = pooling_backward_of(g, g.node(id));
    if (producer < 0) continue;
    const ValueUses uses(g);
    const ir::Node route = g.node(producer);
    const std::string reason = refusal(g, uses, route, g.node(id));
    if (!reason.empty()) {
      ctx.rejections.push_back({"fold_maxpool_gradient", kPattern, route.name, reason});
      continue;
    }
    ir::Node& bwd = g.node(id);
    bwd.inputs[in::dy] = route.inputs[1];
    bwd.inputs.push_back(route.inputs[0]);
    const ir::Attrs window = ops::pool_window_attrs(route.attrs);
    for (const auto& [k, v] : window.items()) bwd.attrs.set(k, v);
    bwd.attrs.set("pooled_dy", int64_t{1});
    g.remove_from_order({route.id});
    ctx.fusions.push_back({"fold_maxpool_gradient", kPattern, bwd.name, {route.name, bwd.name}});
  }
}

}  // namespace trident::passes
