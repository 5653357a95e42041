// cast: converts a tensor to another floating dtype (f32 ⇄ f16 / bf16 / f64), rounding to
// nearest even. The mixed-precision pass inserts it for the fp16 copies of weights and images;
// its backward casts the gradient back, so fp32 master weights get fp32 gradients.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_precision_ops() {
  ir::OpDef cast;
  cast.name = "cast";
  cast.inputs = {"x"};
  cast.outputs = {"y"};
  cast.summary = "convert to the floating dtype of attribute 'dtype' (round to nearest even)";
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
}

}  // namespace trident::ops
