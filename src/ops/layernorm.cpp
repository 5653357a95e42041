// layernorm: the normalisation over the last axis (channels of an NHWC activation, features of
// an [N, F] one) that ConvNeXt and the transformer families use, ONNX's LayerNormalization with
// axis = -1, and its backward. Training and inference compute the same thing (no running
// statistics); the backward recomputes each row's mean and inverse deviation from x instead of
// saving them, so the forward writes only y.
#include <cmath>

#include "ops/op_helpers.h"
#include "ops/norm_params.h"

namespace trident::ops {

namespace {

void expect_per_channel(const Graph& g, const Node& n, size_t i, int64_t c, const char* what) {
  if (in_value(g, n, i).shape != Shape{c})
    throw Error(std::string(what) + " '" + in_value(g, n, i).name + "' must have shape [" + std::to_string(c) + "]");
}

void expect_eps(const Node& n) { NormParams::of(n).check(); }

}  // namespace

void register_layernorm_ops() {
  ir::OpDef ln = op_def("layernorm", {"x", "gamma", "beta"}, {"y"},
                        "(x − mean)/sqrt(var + eps)·gamma + beta over the last axis (biased variance)");
  ln.f32_inputs = {"gamma", "beta"};
  ln.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_float(x, "input");
    if (x.shape.size() < 2) throw Error("input must have a batch axis and the normalised axis");
    expect_per_channel(g, n, 1, x.shape.back(), "gamma");
    expect_per_channel(g, n, 2, x.shape.back(), "beta");
    expect_eps(n);
    return std::vector<TypeInfo>{{x.shape, x.dtype}};
  };
  ln.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1, -1, -1};
    const auto r = g.add_node("layernorm_backward", {n.inputs[0], dys[0], n.inputs[1]}, copy_attrs(n.attrs, {"eps"}),
                              n.name + ".backward");
    return std::vector<int>{r[0], r[1], r[2]};
  };
  ir::OpRegistry::add(ln);

  ir::OpDef bwd = op_def("layernorm_backward", {"x", "dy", "gamma"}, {"dx", "dgamma", "dbeta"},
                         "x̂ = (x − mean)·invstd per row; dx = invstd·(dy·γ − mean(dy·γ) − x̂·mean(dy·γ·x̂)), "
                         "dgamma = Σ dy·x̂ and dbeta = Σ dy over the rows");
  bwd.f32_inputs = {"gamma"};
  bwd.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &dy = in_value(g, n, 1);
    expect_float(x, "input");
    expect_same_shape(x, dy, "the input and its gradient");
    if (dy.dtype != x.dtype) throw Error("the input and its gradient must have one dtype");
    if (x.shape.size() < 2) throw Error("input must have a batch axis and the normalised axis");
    expect_per_channel(g, n, 2, x.shape.back(), "gamma");
    expect_eps(n);
    const Shape c{x.shape.back()};
    const DType param = in_value(g, n, 2).dtype;
    return std::vector<TypeInfo>{{x.shape, x.dtype}, {c, param}, {c, param}};
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
