// Training, after dead-code elimination has removed the first layer's input gradient: the
// batchnorm-relu backward of a layer whose dconv only its own weight gradient reads becomes,
// with that weight gradient, one cbr_weight_backward (ops/cbr_weight_backward.cpp), which the
// GPU runs as one pass over dy and conv_out instead of three passes and a written dconv.
//
//   dy, conv_out ──► batchnorm_relu_backward ──► dconv ──► conv2d_backward_weight(x) ──► dw
//                                   └──► dgamma, dbeta
//     ⇒   cbr_weight_backward(mask, dy, conv_out, gamma, saved_mean, saved_invstd, x)
//           ──► dw, dgamma, dbeta
//   (dconv has that one reader and is no graph output: the layer's input takes no gradient;
//    the backward adds no second gradient, routes no pooled one, clips no relu and gives no
//    residual's; the weight gradient has no prologue and no bias; the shape is one the
//    one-pass kernel takes: ops/cbr_weight_backward.h)
//
// The batchnorm backward node becomes the fused node in place, so its dgamma and dbeta keep
// their value ids (the memory plan's gradient buffer names them) and it runs where the
// batchnorm backward ran. Each candidate is fused or recorded with its reason.
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"
#include "ops/cbr_weight_backward.h"
#include "ops/window.h"
#include "passes/pass.h"
#include "passes/value_uses.h"
#include "ops/norm_params.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "bn-backward+wgrad";

// Empty when `bwd` and the weight gradient `wgrad` reading its dconv may fuse, else why not.
std::string refusal(const ir::Graph& g, const ir::Node& bwd, const ir::Node& wgrad, bool one_pass) {
  if (wgrad.attrs.i("prologue", 0)) return "the weight gradient reads its input through a deferred batchnorm apply";
  if (wgrad.attrs.i("has_bias", 0)) return "the weight gradient also gives the bias's";
  using Stages = ops::BnReluBackwardStages;
  const Stages stages = Stages::of(bwd, g);
  if (stages.residual_gradient) return "the batchnorm backward also gives a residual's gradient";
  if (stages.dy == Stages::Dy::pooled) return "the batchnorm backward routes a pooled gradient";
  if (stages.dy == Stages::Dy::plus_other) return "the batchnorm backward adds a second gradient";
  if (stages.clipped) return "the relu is clipped (its mask is read from y)";
  const ir::Value &x = g.value(wgrad.inputs[0]), &conv_out = g.value(bwd.inputs[ops::bn_relu_bwd_in::conv_out]);
  const Shape w = wgrad.attrs.ints("weight_shape");
  const ops::Window window = ops::conv_window(wgrad.attrs, {w[1], w[2]});
  ops::CbrWeightBackwardForm form;
  form.C = x.shape[3];
  form.K = w[0];
  form.R = w[1];
  form.S = w[2];
  form.groups = window.groups;
  form.dilation_h = window.dil.h;
  form.dilation_w = window.dil.w;
  // A backend that runs it by the decomposition takes any dtype; a one-pass kernel its own.
  form.dtype = one_pass ? conv_out.dtype : DType::f16;
  return ops::cbr_weight_backward_refusal(form);
}

}  // namespace

void fuse_cbr_weight_backward(ir::Graph& g, PassContext& ctx) {
  namespace in = ops::bn_relu_bwd_in;
  const bool one_pass = ctx.options.traits.cbr_weight_backward_one_pass;
  const ValueUses uses(g);
  const std::vector<int> order = g.order();
  for (int id : order) {
    if (g.node(id).op != "batchnorm_relu_backward") continue;
    const int dconv = g.node(id).outputs[ops::bn_relu_bwd_out::dconv];
    // Only a layer whose input takes no gradient is a candidate: its dconv has one reader.
    if (uses.only_reader(dconv) < 0) continue;
    const ir::Node& wgrad = g.node(uses.only_reader(dconv));
    if (wgrad.op != "conv2d_backward_weight" || wgrad.inputs[1] != dconv) continue;
    const std::string reason = refusal(g, g.node(id), wgrad, one_pass);
    if (!reason.empty()) {
      ctx.rejections.push_back({"fuse_cbr_weight_backward", kPattern, g.node(id).name, reason});
      continue;
    }
    const ir::Node w = wgrad;
    ir::Node& bwd = g.node(id);
    const std::string bwd_name = bwd.name;
    bwd.op = "cbr_weight_backward";
    bwd.inputs.resize(in::saved_invstd + 1);
    bwd.inputs.push_back(w.inputs[0]);
    ir::Attrs attrs = ops::conv_window_attrs(w.attrs);
    attrs.set("weight_shape", w.attrs.ints("weight_shape"));
    ops::NormParams::of(bwd).copy_eps_to(attrs);
    bwd.attrs = attrs;
    g.value(dconv).producer = -1;
    const int dw = w.outputs[0];
    bwd.outputs[ops::cbr_weight_bwd_out::dw] = dw;
    bwd.outputs.resize(ops::cbr_weight_bwd_out::dbeta + 1);
    g.value(dw).producer = bwd.id;
    g.remove_from_order({w.id});
    ctx.fusions.push_back({"fuse_cbr_weight_backward", kPattern, bwd_name, {bwd_name, w.name}});
  }
}

}  // namespace trident::passes
