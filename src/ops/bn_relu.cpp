// bn_relu: batchnorm2d followed by relu as one op, the pre-activation of DenseNet's and the
// pre-activation ResNet's layers (passes/fuse_bn_relu.cpp), where the batchnorm's input is not
// a convolution that cbr could take. Training saves the batch statistics and updates the
// running ones exactly as batchnorm2d does; its backward is one batchnorm_relu_backward (the
// relu mask from y, or the packed bits, then the batchnorm backward), as cbr's is, without the
// convolution. The op carries its decomposition, which is how cpu_ref runs it.
#include "core/relu_mask.h"
#include "ops/bn_relu_operands.h"
#include "ops/cbr_operands.h"
#include "ops/op_helpers.h"

namespace trident::ops {

namespace {

// The batchnorm2d of a bn_relu node, on the same inputs.
Node batchnorm_of(const Node& n) {
  Node bn;
  bn.op = "batchnorm2d";
  bn.name = n.name;
  bn.inputs = n.inputs;
  bn.attrs = copy_attrs(n.attrs, {"eps", "momentum", "training"});
  return bn;
}

std::vector<TypeInfo> infer_bn_relu(const Node& n, const Graph& g) {
  if (n.inputs.size() != 5)
    throw Error("expects x, gamma, beta, running_mean, running_var; got " + std::to_string(n.inputs.size()) +
                " inputs");
  const BnReluParams p = BnReluParams::of(n);
  if (p.bit_mask && !p.training) throw Error("an inference bn_relu has no backward to keep a relu mask for");
  std::vector<TypeInfo> out = ir::OpRegistry::get("batchnorm2d").infer(batchnorm_of(n), g);
  if (p.bit_mask) out.push_back({relu_mask_shape(out[bn_relu_out::y].shape), DType::i32});
  return out;
}

std::vector<int> decompose_bn_relu(Graph& g, const Node& n) {
  const Node b = batchnorm_of(n);
  std::vector<int> out = g.add_node("batchnorm2d", b.inputs, b.attrs, n.name + ".bn");
  out[bn_relu_out::y] = g.add_node1("relu", {out[bn_relu_out::y]}, {}, n.name + ".relu");
  if (BnReluParams::of(n).bit_mask) out.push_back(g.add_node1("relu_mask", {out[bn_relu_out::y]}, {}, n.name + ".mask"));
  return out;
}

std::vector<int> backward_bn_relu(Graph& g, const Node& n, const std::vector<int>& dys) {
  std::vector<int> grads(n.inputs.size(), -1);
  if (dys[bn_relu_out::y] < 0) return grads;
  const BnReluParams p = BnReluParams::of(n);
  if (!p.training)
    throw Error("node '" + n.name + "': training through an inference-mode bn_relu is not supported");
  Attrs a = copy_attrs(n.attrs, {"eps"});
  a.set("residual", int64_t{0});
  const int mask = p.bit_mask ? n.outputs.at(bn_relu_out::relu_mask) : n.outputs[bn_relu_out::y];
  // The same operands as cbr's backward, with the batchnorm's input where cbr has conv_out.
  std::vector<int> in(bn_relu_bwd_in::dy_other);
  in[bn_relu_bwd_in::mask] = mask;
  in[bn_relu_bwd_in::dy] = dys[bn_relu_out::y];
  in[bn_relu_bwd_in::conv_out] = n.inputs[bn_relu_in::x];
  in[bn_relu_bwd_in::gamma] = n.inputs[bn_relu_in::gamma];
  in[bn_relu_bwd_in::saved_mean] = n.outputs[bn_relu_out::saved_mean];
  in[bn_relu_bwd_in::saved_invstd] = n.outputs[bn_relu_out::saved_invstd];
  const auto r = g.add_node("batchnorm_relu_backward", in, a, n.name + ".bn_relu_backward");
  grads[bn_relu_in::x] = r[bn_relu_bwd_out::dconv];
  grads[bn_relu_in::gamma] = r[bn_relu_bwd_out::dgamma];
  grads[bn_relu_in::beta] = r[bn_relu_bwd_out::dbeta];
  return grads;
}

}  // namespace

void register_bn_relu_ops() {
  ir::OpDef d = op_def("bn_relu", {"x", "gamma", "beta", "running_mean", "running_var"},
                       {"y", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out", "relu_mask"},
                       "fused batchnorm2d → relu (pre-activation); training: batch statistics + running update");
  d.infer = infer_bn_relu;
  d.aliases = [](const Node& n) {
    if (!BnReluParams::of(n).training) return std::vector<std::pair<int, int>>{};
    return std::vector<std::pair<int, int>>{{bn_relu_out::running_mean, bn_relu_in::running_mean},
                                            {bn_relu_out::running_var, bn_relu_in::running_var}};
  };
  d.side_effects = [](const Node& n) { return BnReluParams::of(n).training; };
  d.backward = backward_bn_relu;
  d.decompose = decompose_bn_relu;
  d.reduction = true;
  d.f32_inputs = {"gamma", "beta", "running_mean", "running_var"};
  ir::OpRegistry::add(d);
}

}  // namespace trident::ops
