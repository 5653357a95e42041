// mul, clip and concat: the element-wise and joining ops that imported models (ONNX) need
// beyond the builder's set. Inference only: none of them has a backward rule yet.
#include <limits>

#include "ops/op_helpers.h"

namespace trident::ops {

void register_tensor_ops() {
  ir::OpDef mul = op_def("mul", {"a", "b"}, {"y"},
                         "a * b; b has a's shape or is one value per channel [C] (last axis)");
  mul.infer = [](const Node& n, const Graph& g) {
    const auto &a = in_value(g, n, 0), &b = in_value(g, n, 1);
    expect_float(a, "input a");
    if (b.dtype != a.dtype) throw Error("operands must have one dtype");
    if (a.shape.empty()) throw Error("input a must have at least one axis");
    if (b.shape != a.shape && b.shape != Shape{a.shape.back()})
      throw Error("operand b has shape " + shape_str(b.shape) + "; it must be " +
                  shape_str(a.shape) + " or [" + std::to_string(a.shape.back()) + "]");
    return std::vector<TypeInfo>{{a.shape, a.dtype}};
  };
  ir::OpRegistry::add(mul);

  ir::OpDef clip = op_def("clip", {"x"}, {"y"}, "min(max(x, min), max); min=0, max=6 is ReLU6");
  clip.infer = [](const Node& n, const Graph& g) {
    expect_float(in_value(g, n, 0), "input");
    const double lo = n.attrs.f("min", -std::numeric_limits<double>::infinity());
    const double hi = n.attrs.f("max", std::numeric_limits<double>::infinity());
    if (!(lo <= hi)) throw Error("attribute 'min' must not exceed 'max'");
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
  };
  ir::OpRegistry::add(clip);

  ir::OpDef concat = op_def("concat", {"x..."}, {"y"}, "joins its inputs along the last (channel) axis");
  concat.variadic = true;
  concat.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("concat needs at least one input");
    const auto& x0 = in_value(g, n, 0);
    expect_float(x0, "input 0");
    if (x0.shape.empty()) throw Error("inputs must have at least one axis");
    Shape out = x0.shape;
    out.back() = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto& x = in_value(g, n, i);
      const Shape& s = x.shape;
      if (s.size() != out.size() || x.dtype != x0.dtype)
        throw Error("input " + std::to_string(i) + " has shape " + shape_str(s) +
                    ", which does not match input 0's rank or dtype");
      for (size_t d = 0; d + 1 < s.size(); ++d)
        if (s[d] != out[d])
          throw Error("input " + std::to_string(i) + " has shape " + shape_str(x.shape) +
                      "; all but the last axis must match " + shape_str(x0.shape));
      out.back() += s.back();
    }
    return std::vector<TypeInfo>{{out, x0.dtype}};
  };
  ir::OpRegistry::add(concat);
}

}  // namespace trident::ops
