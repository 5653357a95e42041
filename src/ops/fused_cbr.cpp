// The fused training operators: cbr (conv → batchnorm → relu) and cbar (conv → batchnorm →
// add(residual) → relu), and their fused backward (relu mask + batchnorm backward in one op).
// A fused op saves only what its backward needs: the conv output and the batch statistics;
// the batchnorm output before the relu is never kept. The mask of the backward is the relu
// output y (kept anyway as the next layer's input), or, with attribute relu_mask = 1, a 1-bit
// mask the forward writes beside y (core/relu_mask.h), which the backward reads in 1/16 of
// the bytes of an f16 y.
//
// Cross-layer fusion (defer_bn_apply) adds two forms: conv_bn_stats, a cbr that stops at the
// batch statistics and hands the next convolution its affine (ops/bn_apply.cpp) instead of y,
// and attribute prologue = 1, under which a fused op's x is such a raw convolution output and
// its convolution reads relu(x·scale + shift) of it. Both appear only after autodiff, so
// they have no backward rule. Each op carries its unfused decomposition.
//
// With attribute bias_cancelled (ops/cbr_operands.h) the convolution runs without its bias:
// the batch mean subtracts it again, so only the running mean sees it. With attribute
// relu_max = m > 0 (cbr only) the relu is clipped at m, ReLU6's clip(0, 6); its backward masks
// with 0 < y < m and reads y itself (no packed mask, no deferred apply).
#include <algorithm>
#include <cmath>

#include "core/relu_mask.h"
#include "core/window_index.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"
#include "ops/conv_stages.h"
#include "ops/op_helpers.h"
#include "ops/window.h"
#include "ops/norm_params.h"

namespace trident::ops {

namespace {

bool is_cbar(const Node& n) { return ConvStages::of(n).residual != ConvStages::Residual::none; }
bool is_stats_only(const Node& n) { return !ConvStages::of(n).apply_affine; }

bool keeps_bit_mask(const Node& n) { return ConvStages::of(n).bit_mask; }
double relu_max(const Node& n) { return ConvStages::of(n).relu_max; }

Attrs conv_attrs(const Attrs& a) { return conv_window_attrs(a); }

// The convolution of a fused node as a plain conv2d node (x, w, [b]) on `x`; without b where
// the batch mean cancels it.
Node conv_of(const Node& n, int x) {
  Node conv;
  conv.op = "conv2d";
  conv.name = n.name;
  conv.inputs = {x, n.inputs[cbr_in::w]};
  const int bias = CbrOperands::of(n).bias;
  if (bias >= 0 && !ConvStages::of(n).bias_cancelled) conv.inputs.push_back(n.inputs[bias]);
  conv.attrs = conv_attrs(n.attrs);
  return conv;
}

std::vector<TypeInfo> infer_fused(const Node& n, const Graph& g) {
  const CbrOperands o = CbrOperands::of(n);
  const int given = static_cast<int>(n.inputs.size());
  const int wanted = (is_cbar(n) ? 7 : 6) + (o.bias >= 0) + (o.x_affine >= 0) + (o.residual_affine >= 0);
  if (has_residual_affine(n) && !is_cbar(n)) throw Error("only cbar has a residual to apply an affine to");
  if (given != wanted || std::max({o.residual, o.bias, o.x_affine, o.residual_affine}) >= given)
    throw Error("expects x, w, gamma, beta, running_mean, running_var" + std::string(is_cbar(n) ? ", residual" : "") +
                ", [b]" + (has_prologue(n) ? ", x_affine" : "") + (has_residual_affine(n) ? ", residual_affine" : "") +
                "; got " + std::to_string(given) + " inputs");
  const TypeInfo y = ir::OpRegistry::get("conv2d").infer(conv_of(n, n.inputs[cbr_in::x]), g).at(0);
  if (o.x_affine >= 0)
    expect_affine(g.value(n.inputs[o.x_affine]), in_value(g, n, cbr_in::x).shape.back(), "the input's affine");
  const Shape c{y.shape[3]};
  for (size_t i = cbr_in::gamma; i <= cbr_in::running_var; ++i)
    if (in_value(g, n, i).shape != c)
      throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
  if (o.residual_affine >= 0) expect_affine(g.value(n.inputs[o.residual_affine]), y.shape[3], "the residual's affine");
  if (is_cbar(n) && in_value(g, n, o.residual).shape != y.shape)
    throw Error("the residual " + shape_str(in_value(g, n, o.residual).shape) +
                " must match the convolution output " + shape_str(y.shape));
  NormParams::of(n).check();
  if (ConvStages::of(n).clipped) {
    if (n.op != "cbr") throw Error("attribute relu_max (a clipped relu) is cbr's only");
    if (!(relu_max(n) > 0) || !std::isfinite(relu_max(n))) throw Error("attribute relu_max must be positive and finite");
    if (keeps_bit_mask(n)) throw Error("a clipped relu's backward masks with 0 < y < relu_max from y, not a packed mask");
  }
  if (has_cancelled_bias(n) && o.bias < 0) throw Error("attribute 'bias_cancelled' needs a bias input");
  if (has_cancelled_bias(n) && in_value(g, n, o.bias).shape != c)
    throw Error("the bias '" + in_value(g, n, o.bias).name + "' must have shape " + shape_str(c));
  const DType stats = in_value(g, n, cbr_in::gamma).dtype;  // gamma's: f32 also under mixed precision
  std::vector<TypeInfo> out{y, y, {c, stats}, {c, stats}, {c, stats}, {c, stats}};
  if (is_stats_only(n)) {
    if (keeps_bit_mask(n)) throw Error("conv_bn_stats writes no relu output to mask");
    out[cbr_out::affine] = {Shape{2, y.shape[3]}, DType::f32};
  }
  if (keeps_bit_mask(n)) out.push_back({relu_mask_shape(y.shape), DType::i32});
  return out;
}

// The running mean of the biased convolution output: running_mean_out + momentum·b, in the
// running mean's dtype.
int running_mean_with_bias(Graph& g, const Node& n, int running_mean) {
  int b = n.inputs[CbrOperands::of(n).bias];
  const Shape c = g.value(b).shape;
  const std::string stats(dtype_name(g.value(running_mean).dtype));
  if (g.value(b).dtype != g.value(running_mean).dtype)
    b = g.add_node1("cast", {b}, {{"dtype", stats}}, n.name + ".bias_as_statistics");
  Attrs m;
  m.set("shape", c);
  m.set("value", NormParams::of(n).momentum);
  m.set("dtype", stats);
  const int momentum = g.add_node1("fill", {}, m, n.name + ".momentum");
  const int shift = g.add_node1("mul", {b, momentum}, {}, n.name + ".mean_shift");
  return g.add_node1("add", {running_mean, shift}, {}, n.name + ".running_mean");
}

std::vector<int> decompose_fused(Graph& g, const Node& n) {
  const CbrOperands o = CbrOperands::of(n);
  int x = n.inputs[cbr_in::x];
  if (o.x_affine >= 0) x = g.add_node1("bn_apply", {x, n.inputs[o.x_affine]}, {}, n.name + ".prologue");
  const Node c = conv_of(n, x);
  const int conv = g.add_node1("conv2d", c.inputs, c.attrs, n.name + ".conv");
  Attrs bn_attrs = copy_attrs(n.attrs, {"eps", "momentum"});
  bn_attrs.set("training", int64_t{1});
  auto bn = g.add_node("batchnorm2d",
                       {conv, n.inputs[cbr_in::gamma], n.inputs[cbr_in::beta], n.inputs[cbr_in::running_mean],
                        n.inputs[cbr_in::running_var]},
                       bn_attrs, n.name + ".bn");
  if (ConvStages::of(n).bias_cancelled) bn[3] = running_mean_with_bias(g, n, bn[3]);
  if (is_stats_only(n)) {
    const int affine = g.add_node1("batchnorm_affine", {conv, n.inputs[cbr_in::gamma], n.inputs[cbr_in::beta]},
                                   copy_attrs(n.attrs, {"eps"}), n.name + ".affine");
    return {affine, conv, bn[1], bn[2], bn[3], bn[4]};
  }
  int z = bn[0];
  int residual = is_cbar(n) ? n.inputs[o.residual] : -1;
  if (o.residual_affine >= 0)
    residual = g.add_node1("bn_apply", {residual, n.inputs[o.residual_affine]}, {{"relu", int64_t{0}}},
                           n.name + ".shortcut_bn");
  if (is_cbar(n)) z = g.add_node1("add", {z, residual}, {}, n.name + ".add");
  const int y = relu_max(n) > 0 ? g.add_node1("clip", {z}, {{"min", 0.0}, {"max", relu_max(n)}}, n.name + ".clip")
                                 : g.add_node1("relu", {z}, {}, n.name + ".relu");
  std::vector<int> out{y, conv, bn[1], bn[2], bn[3], bn[4]};
  if (keeps_bit_mask(n)) out.push_back(g.add_node1("relu_mask", {y}, {}, n.name + ".mask"));
  return out;
}

std::vector<int> backward_fused(Graph& g, const Node& n, const std::vector<int>& dys) {
  const ConvStages stages = ConvStages::of(n);
  if (stages.input_affine || stages.residual == ConvStages::Residual::with_affine)
    throw Error("'" + n.name + "' reads a raw convolution output through an affine, a form defer_bn_apply makes after "
                "autodiff; it has no backward rule");
  const CbrOperands o = CbrOperands::of(n);
  std::vector<int> grads(n.inputs.size(), -1);
  if (dys[0] < 0) return grads;
  Attrs a = copy_attrs(n.attrs, {"eps", "relu_max"});
  a.set("residual", int64_t{is_cbar(n)});
  const int mask = keeps_bit_mask(n) ? n.outputs.at(cbr_out::relu_mask) : n.outputs[cbr_out::y];
  auto r = g.add_node("batchnorm_relu_backward",
                      {mask, dys[0], n.outputs[cbr_out::conv_out], n.inputs[cbr_in::gamma],
                       n.outputs[cbr_out::saved_mean], n.outputs[cbr_out::saved_invstd]},
                      a, n.name + ".bn_relu_backward");
  // The convolution's gradients, exactly as conv2d's own rule emits them.
  std::vector<int> conv_grads = ir::OpRegistry::get("conv2d").backward(g, conv_of(n, n.inputs[cbr_in::x]), {r[0]});
  grads[0] = conv_grads[0];
  grads[1] = conv_grads[1];
  if (o.bias >= 0 && stages.bias_cancelled) {
    // Σ dconv over a channel is zero by construction of the batchnorm backward: exactly zero.
    const ir::Value& b = g.value(n.inputs[o.bias]);
    Attrs zero;
    zero.set("shape", b.shape);
    zero.set("value", 0.0);
    zero.set("dtype", std::string(dtype_name(b.dtype)));
    grads[o.bias] = g.add_node1("fill", {}, zero, n.name + ".bias_grad");
  } else if (o.bias >= 0) {
    grads[o.bias] = conv_grads[2];
  }
  grads[cbr_in::gamma] = r[bn_relu_bwd_out::dgamma];
  grads[cbr_in::beta] = r[bn_relu_bwd_out::dbeta];
  if (is_cbar(n)) grads[o.residual] = r[bn_relu_bwd_out::dresidual];
  return grads;
}

ir::OpDef fused_def(const std::string& name, const std::string& summary) {
  ir::OpDef d = op_def(name, {"x", "w", "gamma", "beta", "running_mean", "running_var"}, {}, summary);
  if (name == "cbar") d.inputs.push_back("residual");
  d.inputs.push_back("b?");
  d.inputs.push_back("x_affine?");
  if (name == "cbar") d.inputs.push_back("residual_affine?");
  d.outputs = {name == "conv_bn_stats" ? "affine" : "y", "conv_out", "saved_mean", "saved_invstd",
               "running_mean_out", "running_var_out"};
  if (name != "conv_bn_stats") d.outputs.push_back("relu_mask");
  d.reads_conv_input = true;
  d.f32_inputs = {"gamma", "beta", "running_mean", "running_var"};
  d.infer = infer_fused;
  d.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{{4, 4}, {5, 5}}; };
  d.side_effects = [](const Node&) { return true; };
  d.macs = [](const Node& n, const Graph& g) {
    const Shape& y = g.value(n.outputs[cbr_out::conv_out]).shape;
    const Shape& w = in_value(g, n, 1).shape;
    return numel(y) * w[1] * w[2] * w[3];
  };
  if (name != "conv_bn_stats") d.backward = backward_fused;
  d.decompose = decompose_fused;
  return d;
}

}  // namespace

void register_fused_cbr_ops() {
  ir::OpRegistry::add(fused_def("cbr", "fused conv → batchnorm (training) → relu"));
  ir::OpRegistry::add(
      fused_def("cbar", "fused conv → batchnorm (training) → add residual → relu"));
  ir::OpRegistry::add(fused_def(
      "conv_bn_stats", "fused conv → batchnorm statistics (training); the next convolution applies its affine"));

  // dy_other: a second gradient of y (the residual branch's, in a ResNet), added to dy as a
  // separate add would (rounded to the activation dtype) while the kernel reads both, so the
  // sum is never written (fold_gradient_sum).
  // mask: the relu output y, its packed 1-bit mask (i32, core/relu_mask.h), or the layer's
  // affine [2, C] f32 (defer_bn_apply), from which y > 0 is recomputed as bn_apply's.
  ir::OpDef bwd = op_def("batchnorm_relu_backward",
                         {"mask", "dy", "conv_out", "gamma", "saved_mean", "saved_invstd", "dy_other_or_window_index?"},
                         {"dconv", "dgamma", "dbeta", "dresidual"},
                         "relu backward (mask from the output) fused with training batchnorm backward");
  bwd.infer = [](const Node& n, const Graph& g) {
    namespace in = bn_relu_bwd_in;
    using Stages = BnReluBackwardStages;
    const Stages stages = Stages::of(n, g);
    const auto &mask = in_value(g, n, in::mask), &dy = in_value(g, n, in::dy), &x = in_value(g, n, in::conv_out);
    expect_rank(x, 4, "conv output");
    if (stages.dy == Stages::Dy::pooled) {
      // dy is the gradient of the max pooling of y that the window attributes describe.
      if (n.inputs.size() != stages.inputs())
        throw Error("attribute pooled_dy needs exactly one more input, the pooling's window index");
      const Window w = pool_window(n.attrs);
      if (w.kernel.h * w.kernel.w > kMostWindowCells) throw Error("the pooling window has more cells than a window index names");
      if (pool_output_shape(n.attrs, x.shape) != dy.shape)
        throw Error("the gradient " + shape_str(dy.shape) + " is not that of the max pooling of " + shape_str(x.shape));
      if (dy.dtype != x.dtype) throw Error("the pooled gradient and the conv output must have one dtype");
      const auto& index = in_value(g, n, in::dy_window_index);
      if (index.dtype != DType::i32 || index.shape != window_index_shape(numel(dy.shape)))
        throw Error("the window index must be i32 " + shape_str(window_index_shape(numel(dy.shape))));
    } else {
      expect_same_shape(dy, x, "the gradient and the conv output");
    }
    if (stages.clipped && (!(stages.relu_max > 0) || stages.mask != Stages::Mask::relu_output))
      throw Error("a clipped relu (relu_max) is masked from its output y, with relu_max positive");
    if (stages.mask == Stages::Mask::affine) {
      expect_affine(mask, x.shape[3], "the affine that gives the relu mask");
    } else if (stages.mask == Stages::Mask::bits) {
      if (mask.shape != relu_mask_shape(x.shape))
        throw Error("the packed relu mask must have shape " + shape_str(relu_mask_shape(x.shape)));
    } else {
      expect_same_shape(mask, x, "relu output and conv output");
    }
    if (stages.dy == Stages::Dy::plus_other) {
      const auto& other = in_value(g, n, in::dy_other);
      expect_same_shape(dy, other, "the two gradients of the relu output");
      if (other.dtype != dy.dtype) throw Error("the two gradients of the relu output must have one dtype");
    }
    const Shape c{x.shape[3]};
    for (size_t i = in::gamma; i <= in::saved_invstd; ++i)
      if (in_value(g, n, i).shape != c)
        throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
    const DType param = in_value(g, n, in::gamma).dtype;
    std::vector<TypeInfo> out{{x.shape, x.dtype}, {c, param}, {c, param}};
    if (stages.residual_gradient) out.push_back({x.shape, x.dtype});
    return out;
  };
  // dconv_buffer ("conv_out" or "dy") and dresidual_over_dy: outputs written into the buffers
  // of inputs that nothing reads later (passes/reuse_gradient_buffer.cpp, which also says why
  // every kernel may).
  bwd.aliases = [](const Node& n) {
    std::vector<std::pair<int, int>> shared;
    const std::string dconv = n.attrs.has("dconv_buffer") ? n.attrs.s("dconv_buffer") : "";
    if (dconv == "conv_out") shared.push_back({bn_relu_bwd_out::dconv, bn_relu_bwd_in::conv_out});
    if (dconv == "dy") shared.push_back({bn_relu_bwd_out::dconv, bn_relu_bwd_in::dy});
    if (n.attrs.i("dresidual_over_dy", 0)) shared.push_back({bn_relu_bwd_out::dresidual, bn_relu_bwd_in::dy});
    return shared;
  };
  bwd.decompose = [](Graph& g, const Node& n) {
    namespace in = bn_relu_bwd_in;
    using Stages = BnReluBackwardStages;
    const Stages stages = Stages::of(n, g);
    int dy = n.inputs[in::dy];
    if (stages.dy == Stages::Dy::plus_other)
      dy = g.add_node1("add", {dy, n.inputs[in::dy_other]}, {}, n.name + ".gradient_sum");
    if (stages.dy == Stages::Dy::pooled) {
      Attrs route = pool_window_attrs(n.attrs);
      route.set("input_shape", g.value(n.inputs[in::conv_out]).shape);
      dy = g.add_node1("maxpool2d_index_backward", {n.inputs[in::dy_window_index], dy}, route, n.name + ".pool_backward");
    }
    int mask = n.inputs[in::mask];
    if (stages.mask == Stages::Mask::affine)
      mask = g.add_node1("bn_apply", {n.inputs[in::conv_out], mask}, {}, n.name + ".recomputed_output");
    // A clipped relu's gradient from its output: 0 < y < m exactly where 0 < z < m.
    Attrs clipped{{"fn", std::string("clip")}, {"min", 0.0}, {"max", stages.relu_max}};
    const int dz = stages.clipped ? g.add_node1("activation_backward", {mask, dy}, clipped, n.name + ".clip")
                                  : g.add_node1(stages.mask == Stages::Mask::bits ? "relu_mask_backward" : "relu_backward",
                                                {mask, dy}, {}, n.name + ".relu");
    auto r = g.add_node("batchnorm2d_backward",
                        {n.inputs[in::conv_out], dz, n.inputs[in::gamma], n.inputs[in::saved_mean],
                         n.inputs[in::saved_invstd]},
                        copy_attrs(n.attrs, {"eps"}), n.name + ".bn");
    std::vector<int> out{r[0], r[1], r[2]};
    if (stages.residual_gradient) out.push_back(dz);
    return out;
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
