// The fused training operators: cbr (conv → batchnorm → relu) and cbar (conv → batchnorm →
// add(residual) → relu), and their fused backward (relu mask + batchnorm backward in one op).
// A fused op saves only what its backward needs: the conv output and the batch statistics;
// the batchnorm output before the relu is never kept. The mask of the backward is the relu
// output y (kept anyway as the next layer's input), or, with attribute relu_mask = 1, a 1-bit
// mask the forward writes beside y (core/relu_mask.h), which the backward reads in 1/16 of
// the bytes of an f16 y. Each op carries its unfused decomposition.
#include "core/relu_mask.h"
#include "ops/op_helpers.h"

namespace trident::ops {

namespace {

// Inputs: x, w, gamma, beta, running_mean, running_var, [residual (cbar)], [bias].
bool is_cbar(const Node& n) { return n.op == "cbar"; }
size_t residual_index(const Node&) { return 6; }
int bias_input(const Node& n) {
  const size_t with_bias = is_cbar(n) ? 8 : 7;
  return n.inputs.size() == with_bias ? n.inputs.back() : -1;
}

bool keeps_bit_mask(const Node& n) { return n.attrs.i("relu_mask", 0) != 0; }

Attrs conv_attrs(const Attrs& a) { return copy_attrs(a, {"stride", "padding", "dilation", "groups"}); }

std::vector<TypeInfo> infer_fused(const Node& n, const Graph& g) {
  Node conv;
  conv.op = "conv2d";
  conv.inputs = {n.inputs[0], n.inputs[1]};
  if (bias_input(n) >= 0) conv.inputs.push_back(bias_input(n));
  conv.attrs = conv_attrs(n.attrs);
  const TypeInfo y = ir::OpRegistry::get("conv2d").infer(conv, g).at(0);
  const Shape c{y.shape[3]};
  for (size_t i = 2; i < 6; ++i)
    if (in_value(g, n, i).shape != c)
      throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
  if (is_cbar(n) && in_value(g, n, residual_index(n)).shape != y.shape)
    throw Error("the residual " + shape_str(in_value(g, n, residual_index(n)).shape) +
                " must match the convolution output " + shape_str(y.shape));
  if (n.attrs.f("eps", 1e-5) <= 0) throw Error("attribute 'eps' must be positive");
  const DType stats = in_value(g, n, 2).dtype;  // gamma's: f32 also under mixed precision
  std::vector<TypeInfo> out{y, y, {c, stats}, {c, stats}, {c, stats}, {c, stats}};
  if (keeps_bit_mask(n)) out.push_back({relu_mask_shape(y.shape), DType::i32});
  return out;
}

std::vector<int> decompose_fused(Graph& g, const Node& n) {
  std::vector<int> conv_in{n.inputs[0], n.inputs[1]};
  if (bias_input(n) >= 0) conv_in.push_back(bias_input(n));
  const int conv = g.add_node1("conv2d", conv_in, conv_attrs(n.attrs), n.name + ".conv");
  Attrs bn_attrs = copy_attrs(n.attrs, {"eps", "momentum"});
  bn_attrs.set("training", int64_t{1});
  auto bn = g.add_node("batchnorm2d", {conv, n.inputs[2], n.inputs[3], n.inputs[4], n.inputs[5]},
                       bn_attrs, n.name + ".bn");
  int z = bn[0];
  if (is_cbar(n)) z = g.add_node1("add", {z, n.inputs[residual_index(n)]}, {}, n.name + ".add");
  const int y = g.add_node1("relu", {z}, {}, n.name + ".relu");
  std::vector<int> out{y, conv, bn[1], bn[2], bn[3], bn[4]};
  if (keeps_bit_mask(n)) out.push_back(g.add_node1("relu_mask", {y}, {}, n.name + ".mask"));
  return out;
}

std::vector<int> backward_fused(Graph& g, const Node& n, const std::vector<int>& dys) {
  std::vector<int> grads(n.inputs.size(), -1);
  if (dys[0] < 0) return grads;
  Attrs a = copy_attrs(n.attrs, {"eps"});
  a.set("residual", int64_t{is_cbar(n)});
  const int mask = keeps_bit_mask(n) ? n.outputs.at(6) : n.outputs[0];
  auto r = g.add_node("batchnorm_relu_backward",
                      {mask, dys[0], n.outputs[1], n.inputs[2], n.outputs[2], n.outputs[3]},
                      a, n.name + ".bn_relu_backward");
  // The convolution's gradients, exactly as conv2d's own rule emits them.
  Node conv;
  conv.op = "conv2d";
  conv.name = n.name;
  conv.inputs = {n.inputs[0], n.inputs[1]};
  if (bias_input(n) >= 0) conv.inputs.push_back(bias_input(n));
  conv.attrs = conv_attrs(n.attrs);
  std::vector<int> conv_grads = ir::OpRegistry::get("conv2d").backward(g, conv, {r[0]});
  grads[0] = conv_grads[0];
  grads[1] = conv_grads[1];
  if (bias_input(n) >= 0) grads.back() = conv_grads[2];
  grads[2] = r[1];
  grads[3] = r[2];
  if (is_cbar(n)) grads[residual_index(n)] = r[3];
  return grads;
}

ir::OpDef fused_def(const std::string& name, const std::string& summary) {
  ir::OpDef d;
  d.name = name;
  d.inputs = {"x", "w", "gamma", "beta", "running_mean", "running_var"};
  if (name == "cbar") d.inputs.push_back("residual");
  d.inputs.push_back("b?");
  d.outputs = {"y", "conv_out", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out", "relu_mask"};
  d.summary = summary;
  d.infer = infer_fused;
  d.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{{4, 4}, {5, 5}}; };
  d.side_effects = [](const Node&) { return true; };
  d.macs = [](const Node& n, const Graph& g) {
    const Shape& y = g.value(n.outputs[0]).shape;
    const Shape& w = in_value(g, n, 1).shape;
    return numel(y) * w[1] * w[2] * w[3];
  };
  d.backward = backward_fused;
  d.decompose = decompose_fused;
  return d;
}

}  // namespace

void register_fused_cbr_ops() {
  ir::OpRegistry::add(fused_def("cbr", "fused conv → batchnorm (training) → relu"));
  ir::OpRegistry::add(
      fused_def("cbar", "fused conv → batchnorm (training) → add residual → relu"));

  ir::OpDef bwd;
  bwd.name = "batchnorm_relu_backward";
  // dy_other: a second gradient of y (the residual branch's, in a ResNet), added to dy as a
  // separate add would (rounded to the activation dtype) while the kernel reads both, so the
  // sum is never written (fold_gradient_sum).
  // mask: the relu output y, or its packed 1-bit mask (i32, core/relu_mask.h).
  bwd.inputs = {"mask", "dy", "conv_out", "gamma", "saved_mean", "saved_invstd", "dy_other?"};
  bwd.outputs = {"dconv", "dgamma", "dbeta", "dresidual"};
  bwd.summary = "relu backward (mask from the output) fused with training batchnorm backward";
  bwd.infer = [](const Node& n, const Graph& g) {
    const auto &mask = in_value(g, n, 0), &dy = in_value(g, n, 1), &x = in_value(g, n, 2);
    expect_rank(x, 4, "conv output");
    expect_same_shape(dy, x, "the gradient and the conv output");
    if (mask.dtype == DType::i32) {
      if (mask.shape != relu_mask_shape(x.shape))
        throw Error("the packed relu mask must have shape " + shape_str(relu_mask_shape(x.shape)));
    } else {
      expect_same_shape(mask, x, "relu output and conv output");
    }
    if (n.inputs.size() == 7) {
      const auto& other = in_value(g, n, 6);
      expect_same_shape(dy, other, "the two gradients of the relu output");
      if (other.dtype != dy.dtype) throw Error("the two gradients of the relu output must have one dtype");
    }
    const Shape c{x.shape[3]};
    for (size_t i = 3; i < 6; ++i)
      if (in_value(g, n, i).shape != c)
        throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
    const DType param = in_value(g, n, 3).dtype;
    std::vector<TypeInfo> out{{x.shape, x.dtype}, {c, param}, {c, param}};
    if (n.attrs.i("residual", 0)) out.push_back({x.shape, x.dtype});
    return out;
  };
  bwd.decompose = [](Graph& g, const Node& n) {
    int dy = n.inputs[1];
    if (n.inputs.size() == 7) dy = g.add_node1("add", {dy, n.inputs[6]}, {}, n.name + ".gradient_sum");
    const bool packed = g.value(n.inputs[0]).dtype == DType::i32;
    const int dz = g.add_node1(packed ? "relu_mask_backward" : "relu_backward", {n.inputs[0], dy}, {}, n.name + ".relu");
    auto r = g.add_node("batchnorm2d_backward", {n.inputs[2], dz, n.inputs[3], n.inputs[4], n.inputs[5]},
                        copy_attrs(n.attrs, {"eps"}), n.name + ".bn");
    std::vector<int> out{r[0], r[1], r[2]};
    if (n.attrs.i("residual", 0)) out.push_back(dz);
    return out;
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
