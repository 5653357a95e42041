// cast: converts a tensor to another floating dtype (f32 ⇄ f16 / bf16 / f64), rounding to
// nearest even. The mixed-precision pass inserts it for the fp16 copies of weights and images;
// its backward casts the gradient back, so fp32 master weights get fp32 gradients.
// cast_group: the same for n tensors at once (input i → output i), so a GPU converts every
// weight of a network in one launch instead of one small launch each (group_weight_casts);
// its backward is one cast_group of the gradients.
#include <algorithm>

#include "ops/op_helpers.h"

namespace trident::ops {

void register_precision_ops() {
  ir::OpDef cast = op_def("cast", {"x"}, {"y"},
                          "convert to the floating dtype of attribute 'dtype' (round to nearest even)");
  cast.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_float(x, "input");
    const DType to = parse_dtype(n.attrs.s("dtype"));
    if (!is_floating(to)) throw Error("attribute 'dtype' must be a floating dtype, got " + n.attrs.s("dtype"));
    return std::vector<TypeInfo>{{x.shape, to}};
  };
  cast.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    const DType back = g.value(n.inputs[0]).dtype;
    return std::vector<int>{g.add_node1("cast", {dys[0]}, {{"dtype", std::string(dtype_name(back))}},
                                        n.name + ".backward")};
  };
  ir::OpRegistry::add(cast);

  ir::OpDef group = op_def("cast_group", {"x..."}, {},
                           "cast of n tensors in one node: input i to output i, to the floating dtype of "
                           "attribute 'dtype'");
  group.variadic = true;
  group.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("a cast group needs at least one input");
    const DType to = parse_dtype(n.attrs.s("dtype"));
    if (!is_floating(to)) throw Error("attribute 'dtype' must be a floating dtype, got " + n.attrs.s("dtype"));
    std::vector<TypeInfo> out;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto& x = in_value(g, n, i);
      expect_float(x, "input " + std::to_string(i));
      out.push_back({x.shape, to});
    }
    return out;
  };
  group.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    // One group per dtype the gradients go back to (all f32 for the master weights).
    std::vector<int> grads(n.inputs.size(), -1);
    std::vector<DType> done;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const DType back = g.value(n.inputs[i]).dtype;
      if (dys[i] < 0 || std::find(done.begin(), done.end(), back) != done.end()) continue;
      done.push_back(back);
      std::vector<size_t> members;
      std::vector<int> in;
      for (size_t k = i; k < n.inputs.size(); ++k)
        if (dys[k] >= 0 && g.value(n.inputs[k]).dtype == back) {
          members.push_back(k);
          in.push_back(dys[k]);
        }
      const std::vector<int> out = g.add_node("cast_group", in, {{"dtype", std::string(dtype_name(back))}},
                                              n.name + ".backward." + std::string(dtype_name(back)));
      for (size_t m = 0; m < members.size(); ++m) {
        grads[members[m]] = out[m];
        g.value(out[m]).name = g.value(in[m]).name + "." + std::string(dtype_name(back));
      }
    }
    return grads;
  };
  ir::OpRegistry::add(group);
}

}  // namespace trident::ops
