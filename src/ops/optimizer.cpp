// sgd_update: one node that steps every parameter, so the optimizer is one kernel over the
// flat parameter, gradient and momentum buffers. Parameters and momentum update in place.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_optimizer_ops() {
  ir::OpDef sgd;
  sgd.name = "sgd_update";
  sgd.inputs = {"lr", "params...", "grads...", "momentum..."};
  sgd.outputs = {"params_out...", "momentum_out..."};
  sgd.variadic = true;
  sgd.summary = "SGD with momentum, weight decay and optional Nesterov, in place";
  sgd.infer = [](const Node& n, const Graph& g) {
    const int64_t count = n.attrs.i("count");
    if (count < 1 || static_cast<int64_t>(n.inputs.size()) != 1 + 3 * count)
      throw Error("expects 1 + 3*count inputs (lr, params, grads, momentum buffers)");
    if (in_value(g, n, 0).shape != Shape{1}) throw Error("lr must have shape [1]");
    std::vector<TypeInfo> out;
    for (int64_t i = 0; i < count; ++i) {
      const auto& p = in_value(g, n, 1 + i);
      expect_same_shape(p, in_value(g, n, 1 + count + i), "parameter and gradient");
      expect_same_shape(p, in_value(g, n, 1 + 2 * count + i), "parameter and momentum");
      out.push_back({p.shape, p.dtype});
    }
    for (int64_t i = 0; i < count; ++i) out.push_back(out[i]);
    return out;
  };
  sgd.aliases = [](const Node& n) {
    const int count = static_cast<int>(n.attrs.i("count"));
    std::vector<std::pair<int, int>> a;
    for (int i = 0; i < count; ++i) a.push_back({i, 1 + i});
    for (int i = 0; i < count; ++i) a.push_back({count + i, 1 + 2 * count + i});
    return a;
  };
  sgd.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(sgd);
}

}  // namespace trident::ops
