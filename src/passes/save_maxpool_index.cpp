// Training, after autodiff: a max pooling keeps a one-byte window index for its backward
// (core/window_index.h) instead of the backward re-reading its input. The input — in CNNs the
// output of a conv → bn → relu — then dies as soon as the pooling has read it, and the
// backward reads a byte per pooled element instead of the input's R·S/stride² elements.
//
//   x ──► maxpool2d ──► y                       x ──► maxpool2d ──► y, window_index
//   x, dy ──► maxpool2d_backward ──► dx    ⇒         window_index, dy ──► maxpool2d_index_backward ──► dx
//
// Legal where the backward's x is the input of a max pooling of the same window (the one it
// differentiates) and the window has fewer than 256 cells; others keep reading x, recorded with
// the reason.
#include "core/window_index.h"
#include "ops/window.h"
#include "passes/pass.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "maxpool-index";

bool same_window(const ir::Node& a, const ir::Node& b) {
  const ops::Window u = ops::pool_window(a.attrs), v = ops::pool_window(b.attrs);
  return u.kernel == v.kernel && u.stride == v.stride && u.pad == v.pad && u.ceil_mode == v.ceil_mode;
}

// The forward max pooling that `backward` differentiates: a maxpool2d reading the same x with
// the same window whose output matches dy; -1 when there is none.
int forward_of(const ir::Graph& g, const std::vector<std::vector<int>>& users, const ir::Node& backward) {
  const int x = backward.inputs[0], dy = backward.inputs[1];
  for (int u : users[x]) {
    const ir::Node& n = g.node(u);
    if (n.op == "maxpool2d" && n.inputs[0] == x && same_window(n, backward) &&
        g.value(n.outputs[0]).shape == g.value(dy).shape)
      return u;
  }
  return -1;
}

}  // namespace

void save_maxpool_index(ir::Graph& g, PassContext& ctx) {
  const auto users = g.users();
  for (int id : std::vector<int>(g.order())) {
    if (g.node(id).op != "maxpool2d_backward") continue;
    const ir::Node backward = g.node(id);
    const int forward = forward_of(g, users, backward);
    if (forward < 0) {
      ctx.rejections.push_back({"save_maxpool_index", kPattern, backward.name,
                                "no max pooling of the same window reads its input"});
      continue;
    }
    const ops::Window w = ops::pool_window(backward.attrs);
    if (w.kernel.h * w.kernel.w > kMostWindowCells) {
      ctx.rejections.push_back({"save_maxpool_index", kPattern, g.node(forward).name,
                                "its window has more than " + std::to_string(kMostWindowCells) + " cells"});
      continue;
    }
    const int index = g.node(forward).attrs.i("window_index", 0) != 0
                          ? g.node(forward).outputs.at(1)
                          : g.set_attr_and_grow(forward, "window_index", int64_t{1}).at(1);
    ir::Node& n = g.node(id);
    n.op = "maxpool2d_index_backward";
    n.attrs = ops::pool_window_attrs(backward.attrs);
    n.attrs.set("input_shape", g.value(backward.inputs[0]).shape);
    n.inputs = {index, backward.inputs[1]};
    ctx.fusions.push_back({"save_maxpool_index", kPattern, g.node(forward).name, {g.node(forward).name, backward.name}});
  }
}

}  // namespace trident::passes
