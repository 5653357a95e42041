// sgd_update: one node that steps every parameter, so the optimizer is one kernel over the
// flat parameter, gradient and momentum buffers. Parameters and momentum update in place.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_optimizer_ops() {
  ir::OpDef sgd;
  sgd.name = "sgd_update";
  sgd.inputs = {"lr", "params...", "grads...", "momentum...", "loss_scale?", "good_steps?"};
  sgd.outputs = {"params_out...", "momentum_out...", "loss_scale_out?", "good_steps_out?"};
  sgd.variadic = true;
  sgd.summary = "SGD with momentum, weight decay and optional Nesterov, in place; with "
                "loss_scaling, gradients are unscaled and an overflowed step is skipped";
  sgd.infer = [](const Node& n, const Graph& g) {
    const int64_t count = n.attrs.i("count");
    const int64_t scaling = n.attrs.i("loss_scaling", 0) ? 2 : 0;
    if (count < 1 || static_cast<int64_t>(n.inputs.size()) != 1 + 3 * count + scaling)
      throw Error("expects 1 + 3*count inputs (lr, params, grads, momentum buffers)" +
                  std::string(scaling ? " + loss scale and good-step count" : ""));
    if (in_value(g, n, 0).shape != Shape{1}) throw Error("lr must have shape [1]");
    std::vector<TypeInfo> out;
    for (int64_t i = 0; i < count; ++i) {
      const auto& p = in_value(g, n, 1 + i);
      expect_same_shape(p, in_value(g, n, 1 + count + i), "parameter and gradient");
      expect_same_shape(p, in_value(g, n, 1 + 2 * count + i), "parameter and momentum");
      out.push_back({p.shape, p.dtype});
    }
    for (int64_t i = 0; i < count; ++i) out.push_back(out[i]);
    for (int64_t i = 0; i < scaling; ++i) {
      const auto& s = in_value(g, n, 1 + 3 * count + i);
      if (s.shape != Shape{1}) throw Error("the loss scale and good-step count must have shape [1]");
      out.push_back({s.shape, s.dtype});
    }
    return out;
  };
  sgd.aliases = [](const Node& n) {
    const int count = static_cast<int>(n.attrs.i("count"));
    std::vector<std::pair<int, int>> a;
    for (int i = 0; i < count; ++i) a.push_back({i, 1 + i});
    for (int i = 0; i < count; ++i) a.push_back({count + i, 1 + 2 * count + i});
    if (n.attrs.i("loss_scaling", 0)) {
      a.push_back({2 * count, 1 + 3 * count});
      a.push_back({2 * count + 1, 2 + 3 * count});
    }
    return a;
  };
  sgd.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(sgd);
}

}  // namespace trident::ops
