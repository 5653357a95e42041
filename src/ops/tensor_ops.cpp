// mul, clip and concat: the element-wise and joining ops that imported models (ONNX) need
// beyond the builder's set. mul (with mul_reduce for a broadcast operand's gradient) and clip
// have backward rules; concat's backward slices each input's channels out of the gradient
// (channel_slice, ops/channel_ops.cpp).
#include <limits>

#include "ops/mul_broadcast.h"
#include "ops/op_helpers.h"

namespace trident::ops {

void register_tensor_ops() {
  ir::OpDef mul = op_def("mul", {"a", "b"}, {"y"},
                         "a * b; b has a's shape, is one value per channel [C] (last axis), or one per "
                         "sample and channel [N, 1, 1, C] (squeeze-excitation)");
  mul.infer = [](const Node& n, const Graph& g) {
    const auto &a = in_value(g, n, 0), &b = in_value(g, n, 1);
    expect_float(a, "input a");
    if (b.dtype != a.dtype) throw Error("operands must have one dtype");
    if (a.shape.empty()) throw Error("input a must have at least one axis");
    if (mul_broadcast(a.shape, b.shape) == MulBroadcast::none)
      throw Error("operand b has shape " + shape_str(b.shape) + "; it must be " + shape_str(a.shape) + ", [" +
                  std::to_string(a.shape.back()) + "]" +
                  (a.shape.size() == 4 ? " or [" + std::to_string(a.shape[0]) + ",1,1," + std::to_string(a.shape[3]) + "]"
                                       : ""));
    return std::vector<TypeInfo>{{a.shape, a.dtype}};
  };
  // da = dy·b (broadcast as the forward), db = Σ a·dy over the axes b was broadcast along.
  mul.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1, -1};
    const int da = g.add_node1("mul", {dys[0], n.inputs[1]}, {}, n.name + ".backward_a");
    const bool same = g.value(n.inputs[0]).shape == g.value(n.inputs[1]).shape;
    const int db = same ? g.add_node1("mul", {dys[0], n.inputs[0]}, {}, n.name + ".backward_b")
                        : g.add_node1("mul_reduce", {n.inputs[0], dys[0], n.inputs[1]}, {}, n.name + ".backward_b");
    return std::vector<int>{da, db};
  };
  ir::OpRegistry::add(mul);

  ir::OpDef reduce = op_def("mul_reduce", {"a", "dy", "b"}, {"db"},
                            "Σ a·dy over the axes along which mul broadcast b: b's gradient ([C] or [N, 1, 1, C])");
  reduce.infer = [](const Node& n, const Graph& g) {
    const auto &a = in_value(g, n, 0), &dy = in_value(g, n, 1), &b = in_value(g, n, 2);
    expect_same_shape(a, dy, "the operand and the gradient");
    const MulBroadcast k = mul_broadcast(a.shape, b.shape);
    if (k != MulBroadcast::channel && k != MulBroadcast::sample_channel)
      throw Error("operand b " + shape_str(b.shape) + " is not broadcast over " + shape_str(a.shape));
    return std::vector<TypeInfo>{{b.shape, a.dtype}};
  };
  ir::OpRegistry::add(reduce);

  ir::OpDef clip = op_def("clip", {"x"}, {"y"}, "min(max(x, min), max); min=0, max=6 is ReLU6");
  clip.infer = [](const Node& n, const Graph& g) {
    expect_float(in_value(g, n, 0), "input");
    const double lo = n.attrs.f("min", -std::numeric_limits<double>::infinity());
    const double hi = n.attrs.f("max", std::numeric_limits<double>::infinity());
    if (!(lo <= hi)) throw Error("attribute 'min' must not exceed 'max'");
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
  };
  clip.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    Attrs a = copy_attrs(n.attrs, {"min", "max"});
    a.set("fn", std::string("clip"));
    return std::vector<int>{g.add_node1("activation_backward", {n.inputs[0], dys[0]}, a, n.name + ".backward")};
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
  concat.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    std::vector<int> dxs(n.inputs.size(), -1);
    if (dys[0] < 0) return dxs;
    if (n.inputs.size() == 1) return std::vector<int>{dys[0]};
    int64_t offset = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int64_t c = g.value(n.inputs[i]).shape.back();
      dxs[i] = g.add_node1("channel_slice", {dys[0]}, {{"start", offset}, {"channels", c}},
                           n.name + ".backward" + std::to_string(i));
      offset += c;
    }
    return dxs;
  };
  ir::OpRegistry::add(concat);
}

}  // namespace trident::ops
