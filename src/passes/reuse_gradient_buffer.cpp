// Training: a batchnorm_relu_backward writes its full-size outputs into the buffers of inputs
// that nobody reads after it, so a backward needs no new full-size tensor while it runs (at
// the first batchnorm backward of a network, where every saved activation is still live, that
// is the step's peak memory):
// - dconv over conv_out (attribute dconv_buffer = "conv_out") where this is conv_out's last
//   reader, else over dy ("dy");
// - dresidual over dy (dresidual_over_dy = 1) where dy is free and dconv did not take it.
// The kernels read every element of those inputs before the same thread writes that element
// (the reduction reads dy and stores dz = dresidual; the apply reads conv_out and dz or dy, then
// stores dconv). oneDNN's batch normalization backward does not promise to read its source
// before writing the source gradient, so where a backend says so (the cpu backend's traits:
// bn_backward_overwrites_conv_out off) dconv takes dy's buffer only.
// Runs last, when no pass will move a reader any more.
#include "ops/cbr_operands.h"
#include "passes/buffer_reuse.h"
#include "passes/pass.h"

namespace trident::passes {

void reuse_gradient_buffer(ir::Graph& g, PassContext& ctx) {
  namespace in = ops::bn_relu_bwd_in;
  namespace out = ops::bn_relu_bwd_out;
  const auto users = g.users();
  const std::vector<int> position = order_positions(g);
  const bool over_conv_out = ctx.options.traits.bn_backward_overwrites_conv_out;
  for (int id : g.order()) {
    ir::Node& n = g.node(id);
    if (n.op != "batchnorm_relu_backward") continue;
    const ir::Value& dconv = g.value(n.outputs[out::dconv]);
    auto fits = [&](int v) { return g.value(v).shape == dconv.shape && g.value(v).dtype == dconv.dtype; };
    auto free = [&](int v) { return fits(v) && buffer_free_after(g, users, position, id, v); };
    const int conv_out = n.inputs[in::conv_out], dy = n.inputs[in::dy];
    bool dy_taken = false;
    if (over_conv_out && free(conv_out)) {
      n.attrs.set("dconv_buffer", std::string("conv_out"));
    } else if (free(dy)) {
      n.attrs.set("dconv_buffer", std::string("dy"));
      dy_taken = true;
    }
    if (n.outputs.size() > out::dresidual && !dy_taken && free(dy)) n.attrs.set("dresidual_over_dy", int64_t{1});
  }
}

}  // namespace trident::passes
