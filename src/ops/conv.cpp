// conv2d and its two backward ops. Activations NHWC, weights OHWI [K,R,S,C/groups].
// The backward rule emits both the data and the weight gradient; the data gradient of a
// layer whose input needs none (the first conv) is removed later by dead-code elimination.
#include "ops/op_helpers.h"
#include "ops/window.h"

namespace trident::ops {

namespace {

int64_t conv_macs(const Shape& y, const Shape& w) { return numel(y) * w[1] * w[2] * w[3]; }

std::vector<int> conv_backward(Graph& g, const Node& n, const std::vector<int>& dys) {
  std::vector<int> grads(n.inputs.size(), -1);
  if (dys[0] < 0) return grads;
  Attrs geom = conv_window_attrs(n.attrs);
  const bool has_bias = n.inputs.size() == 3;

  Attrs data_attrs = geom;
  data_attrs.set("input_shape", g.value(n.inputs[0]).shape);
  grads[0] = g.add_node1("conv2d_backward_data", {dys[0], n.inputs[1]}, data_attrs,
                         n.name + ".dgrad");

  Attrs w_attrs = geom;
  w_attrs.set("weight_shape", g.value(n.inputs[1]).shape);
  w_attrs.set("has_bias", int64_t{has_bias});
  auto wg = g.add_node("conv2d_backward_weight", {n.inputs[0], dys[0]}, w_attrs, n.name + ".wgrad");
  grads[1] = wg[0];
  if (has_bias) grads[2] = wg[1];
  return grads;
}

}  // namespace

void register_conv_ops() {
  ir::OpDef conv = op_def("conv2d", {"x", "w", "b?"}, {"y"},
                          "2-D convolution, NHWC activations, OHWI weights, optional bias");
  conv.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &w = in_value(g, n, 1);
    expect_rank(x, 4, "input");
    expect_rank(w, 4, "weight");
    expect_float(x, "input");
    Shape y = conv_output_shape(n.attrs, x.shape, w.shape);
    if (n.inputs.size() == 3 && in_value(g, n, 2).shape != Shape{w.shape[0]})
      throw Error("bias must have shape [" + std::to_string(w.shape[0]) + "], got " +
                  shape_str(in_value(g, n, 2).shape));
    return std::vector<TypeInfo>{{y, x.dtype}};
  };
  conv.macs = [](const Node& n, const Graph& g) {
    return conv_macs(g.value(n.outputs[0]).shape, in_value(g, n, 1).shape);
  };
  conv.backward = conv_backward;
  conv.reads_conv_input = true;
  ir::OpRegistry::add(conv);

  ir::OpDef dgrad = op_def("conv2d_backward_data", {"dy", "w"}, {"dx"},
                           "gradient of conv2d with respect to its input");
  dgrad.infer = [](const Node& n, const Graph& g) {
    const auto &dy = in_value(g, n, 0), &w = in_value(g, n, 1);
    Shape x = n.attrs.ints("input_shape");
    if (x.size() != 4) throw Error("attribute 'input_shape' must have 4 extents");
    if (conv_output_shape(n.attrs, x, w.shape) != dy.shape)
      throw Error("output gradient " + shape_str(dy.shape) + " does not match the convolution of " +
                  shape_str(x));
    return std::vector<TypeInfo>{{x, dy.dtype}};
  };
  dgrad.macs = [](const Node& n, const Graph& g) {
    return conv_macs(in_value(g, n, 0).shape, in_value(g, n, 1).shape);
  };
  ir::OpRegistry::add(dgrad);

  // x_affine (attribute prologue = 1, defer_bn_apply): x is a raw convolution output and the
  // convolution's input was relu(x·scale + shift) of it (bn_apply), recomputed here.
  ir::OpDef wgrad = op_def("conv2d_backward_weight", {"x", "dy", "x_affine?"}, {"dw", "db"},
                           "gradient of conv2d with respect to its weight (and bias)");
  wgrad.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &dy = in_value(g, n, 1);
    const bool prologue = n.attrs.i("prologue", 0) != 0;
    if (prologue != (n.inputs.size() == 3))
      throw Error("attribute prologue needs exactly one more input, the input's affine");
    if (prologue) {
      expect_rank(x, 4, "input");
      expect_affine(in_value(g, n, 2), x.shape[3], "the input's affine");
    }
    Shape w = n.attrs.ints("weight_shape");
    if (w.size() != 4) throw Error("attribute 'weight_shape' must have 4 extents");
    if (conv_output_shape(n.attrs, x.shape, w) != dy.shape)
      throw Error("output gradient " + shape_str(dy.shape) + " does not match the convolution of " +
                  shape_str(x.shape));
    std::vector<TypeInfo> out{{w, x.dtype}};
    if (n.attrs.i("has_bias", 0)) out.push_back({{w[0]}, x.dtype});
    return out;
  };
  wgrad.macs = [](const Node& n, const Graph& g) {
    return conv_macs(in_value(g, n, 1).shape, g.value(n.outputs[0]).shape);
  };
  wgrad.decompose = [](Graph& g, const Node& n) {
    Attrs a = n.attrs;
    a.set("prologue", int64_t{0});
    int x = n.inputs[0];
    if (n.inputs.size() == 3) x = g.add_node1("bn_apply", {x, n.inputs[2]}, {}, n.name + ".prologue");
    return g.add_node("conv2d_backward_weight", {x, n.inputs[1]}, a, n.name + ".plain");
  };
  ir::OpRegistry::add(wgrad);
}

}  // namespace trident::ops
