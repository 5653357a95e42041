// Inference: a conv2d_epilogue whose residual is read by nobody after it writes its output
// into the residual's buffer (attribute inplace_residual, which makes the op alias output 0
// onto that input). The oneDNN kernel then accumulates the convolution onto the residual in
// place instead of copying it first. Runs last, when no pass will move a reader any more.
#include "passes/buffer_reuse.h"
#include "passes/pass.h"

namespace trident::passes {

void reuse_residual_buffer(ir::Graph& g, PassContext&) {
  const auto users = g.users();
  const std::vector<int> position = order_positions(g);
  for (int id : g.order()) {
    ir::Node& n = g.node(id);
    if (n.op != "conv2d_epilogue" || !n.attrs.i("residual", 0)) continue;
    if (buffer_free_after(g, users, position, id, n.inputs.back())) n.attrs.set("inplace_residual", int64_t{1});
  }
}

}  // namespace trident::passes
