// Element-wise ops: relu (+ its backward, which reads the forward output, not the input,
// so the pre-activation tensor can die early), add, and fill (the loss seed of autodiff).
#include "ops/op_helpers.h"

namespace trident::ops {

void register_elementwise_ops() {
  ir::OpDef relu = op_def("relu", {"x"}, {"y"}, "max(x, 0)");
  relu.infer = [](const Node& n, const Graph& g) {
    expect_float(in_value(g, n, 0), "input");
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
  };
  relu.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    return std::vector<int>{
        g.add_node1("relu_backward", {n.outputs[0], dys[0]}, {}, n.name + ".backward")};
  };
  relu.elementwise = true;
  ir::OpRegistry::add(relu);

  ir::OpDef relu_bwd = op_def("relu_backward", {"y", "dy"}, {"dx"},
                              "dy where the relu output is positive, else 0");
  relu_bwd.infer = [](const Node& n, const Graph& g) {
    expect_same_shape(in_value(g, n, 0), in_value(g, n, 1), "relu output and its gradient");
    return std::vector<TypeInfo>{{in_value(g, n, 1).shape, in_value(g, n, 1).dtype}};
  };
  ir::OpRegistry::add(relu_bwd);

  ir::OpDef add = op_def("add", {"a", "b"}, {"y"}, "a + b, same shapes (no broadcasting)");
  add.infer = [](const Node& n, const Graph& g) {
    expect_same_shape(in_value(g, n, 0), in_value(g, n, 1), "add operands");
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
  };
  add.backward = [](Graph&, const Node&, const std::vector<int>& dys) {
    return std::vector<int>{dys[0], dys[0]};
  };
  add.elementwise = true;
  ir::OpRegistry::add(add);

  ir::OpDef fill = op_def("fill", {}, {"y"}, "a tensor of one constant value");
  fill.infer = [](const Node& n, const Graph&) {
    Shape s = n.attrs.ints("shape");
    for (int64_t d : s)
      if (d <= 0) throw Error("attribute 'shape' must have positive extents");
    DType t = n.attrs.has("dtype") ? parse_dtype(n.attrs.s("dtype")) : DType::f32;
    n.attrs.f("value");
    return std::vector<TypeInfo>{{s, t}};
  };
  ir::OpRegistry::add(fill);
}

}  // namespace trident::ops
