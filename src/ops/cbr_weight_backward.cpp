// cbr_weight_backward: the backward of a fused layer whose input takes no gradient (a network's
// first convolution, reading the image) — its batchnorm-relu backward and its weight gradient
// as one op, so a backend may form the weight gradient without writing dconv, which nothing
// else reads (passes/fuse_cbr_weight_backward.cpp).
//
// Why one pass suffices: with g = dy·mask, x̂ = (conv_out − mean)·invstd and M rows, the
// batchnorm backward gives dconv = γ·invstd·(g − Σg/M − (conv_out − mean)·invstd·dγ/M) with
// dγ = invstd·Σ g·(conv_out − mean), and dw = Σ dconv ⊗ window(x) is linear in dconv, so
//   dw = γ·invstd·(Σ g⊗x − Σg/M·Σ x − invstd·dγ/M·Σ (conv_out − mean)⊗x):
// three sums and the two batchnorm sums, all gathered in the same walk over dy and conv_out.
// The decomposition is the two unfused ops; a backend's kernel agrees with it within the
// rounding of dconv, which the decomposition stores in the activation dtype.
#include "ops/cbr_operands.h"
#include "ops/op_helpers.h"
#include "ops/window.h"

namespace trident::ops {

namespace {

namespace in = cbr_weight_bwd_in;

// The batchnorm-relu backward part as a node of its own, on the same values.
Node batchnorm_part(const Node& n) {
  Node bn;
  bn.op = "batchnorm_relu_backward";
  bn.name = n.name;
  bn.inputs.assign(n.inputs.begin(), n.inputs.begin() + in::x);
  bn.attrs = copy_attrs(n.attrs, {"eps"});
  bn.attrs.set("residual", int64_t{0});
  return bn;
}

Attrs wgrad_attrs(const Node& n) {
  Attrs a = conv_window_attrs(n.attrs);
  a.set("weight_shape", n.attrs.ints("weight_shape"));
  a.set("has_bias", int64_t{0});
  return a;
}

std::vector<TypeInfo> infer(const Node& n, const Graph& g) {
  for (const char* unsupported : {"pooled_dy", "relu_max", "residual", "has_bias", "prologue"})
    if (n.attrs.i(unsupported, 0) != 0)
      throw Error(std::string("takes no attribute ") + unsupported + ": that form keeps the two ops apart");
  const std::vector<TypeInfo> bn = ir::OpRegistry::get("batchnorm_relu_backward").infer(batchnorm_part(n), g);
  const ir::Value &x = in_value(g, n, in::x), &conv_out = in_value(g, n, in::conv_out);
  expect_rank(x, 4, "the convolution's input");
  if (x.dtype != conv_out.dtype) throw Error("the convolution's input and output must have one dtype");
  const Shape w = n.attrs.ints("weight_shape");
  if (w.size() != 4) throw Error("attribute 'weight_shape' must have 4 extents");
  if (conv_output_shape(n.attrs, x.shape, w) != conv_out.shape)
    throw Error("the conv output " + shape_str(conv_out.shape) + " is not the convolution of " + shape_str(x.shape) +
                " by a weight " + shape_str(w));
  return {{w, x.dtype}, bn[1], bn[2]};
}

std::vector<int> decompose(Graph& g, const Node& n) {
  const Node bn = batchnorm_part(n);
  const auto r = g.add_node(bn.op, bn.inputs, bn.attrs, n.name + ".bn_relu_backward");
  const auto wg = g.add_node("conv2d_backward_weight", {n.inputs[in::x], r[0]}, wgrad_attrs(n), n.name + ".wgrad");
  return {wg[0], r[1], r[2]};
}

}  // namespace

void register_cbr_weight_backward_ops() {
  ir::OpDef d = op_def("cbr_weight_backward", {"mask", "dy", "conv_out", "gamma", "saved_mean", "saved_invstd", "x"},
                       {"dw", "dgamma", "dbeta"},
                       "batchnorm_relu_backward and the weight gradient of a layer whose input takes no gradient");
  d.infer = infer;
  d.decompose = decompose;
  d.macs = [](const Node& n, const Graph& g) {
    const Shape& y = in_value(g, n, in::conv_out).shape;
    const Shape w = n.attrs.ints("weight_shape");
    return numel(y) * w[1] * w[2] * w[3];
  };
  ir::OpRegistry::add(d);
}

}  // namespace trident::ops
