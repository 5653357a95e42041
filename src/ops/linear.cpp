// linear (y = x·wᵀ + b, weights [out, in]) and its data/weight backward ops.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_linear_ops() {
  ir::OpDef lin = op_def("linear", {"x", "w", "b?"}, {"y"}, "fully connected layer, weights [out, in]");
  lin.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &w = in_value(g, n, 1);
    expect_rank(x, 2, "input");
    expect_rank(w, 2, "weight");
    expect_float(x, "input");
    if (w.shape[1] != x.shape[1])
      throw Error("weight " + shape_str(w.shape) + " expects " + std::to_string(w.shape[1]) +
                  " input features but the input " + shape_str(x.shape) + " has " +
                  std::to_string(x.shape[1]));
    if (n.inputs.size() == 3 && in_value(g, n, 2).shape != Shape{w.shape[0]})
      throw Error("bias must have shape [" + std::to_string(w.shape[0]) + "]");
    return std::vector<TypeInfo>{{{x.shape[0], w.shape[0]}, x.dtype}};
  };
  lin.macs = [](const Node& n, const Graph& g) {
    return numel(in_value(g, n, 0).shape) * in_value(g, n, 1).shape[0];
  };
  lin.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    std::vector<int> grads(n.inputs.size(), -1);
    if (dys[0] < 0) return grads;
    const bool has_bias = n.inputs.size() == 3;
    grads[0] = g.add_node1("linear_backward_data", {dys[0], n.inputs[1]}, {}, n.name + ".dgrad");
    auto wg = g.add_node("linear_backward_weight", {n.inputs[0], dys[0]},
                         {{"has_bias", int64_t{has_bias}}}, n.name + ".wgrad");
    grads[1] = wg[0];
    if (has_bias) grads[2] = wg[1];
    return grads;
  };
  ir::OpRegistry::add(lin);

  ir::OpDef dgrad = op_def("linear_backward_data", {"dy", "w"}, {"dx"}, "dx = dy·w");
  dgrad.infer = [](const Node& n, const Graph& g) {
    const auto &dy = in_value(g, n, 0), &w = in_value(g, n, 1);
    expect_rank(dy, 2, "output gradient");
    if (dy.shape[1] != w.shape[0]) throw Error("output gradient does not match the weight");
    return std::vector<TypeInfo>{{{dy.shape[0], w.shape[1]}, dy.dtype}};
  };
  dgrad.macs = [](const Node& n, const Graph& g) {
    return in_value(g, n, 0).shape[0] * numel(in_value(g, n, 1).shape);
  };
  ir::OpRegistry::add(dgrad);

  ir::OpDef wgrad = op_def("linear_backward_weight", {"x", "dy"}, {"dw", "db"}, "dw = dyᵀ·x, db = Σ dy");
  wgrad.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &dy = in_value(g, n, 1);
    expect_rank(x, 2, "input");
    expect_rank(dy, 2, "output gradient");
    if (x.shape[0] != dy.shape[0]) throw Error("input and output gradient batch sizes differ");
    std::vector<TypeInfo> out{{{dy.shape[1], x.shape[1]}, x.dtype}};
    if (n.attrs.i("has_bias", 0)) out.push_back({{dy.shape[1]}, x.dtype});
    return out;
  };
  wgrad.macs = [](const Node& n, const Graph& g) {
    return numel(in_value(g, n, 0).shape) * in_value(g, n, 1).shape[1];
  };
  ir::OpRegistry::add(wgrad);
}

}  // namespace trident::ops
