// conv2d and its data/weight gradients on oneDNN convolution primitives. Activations stay
// NHWC; weights are given to each primitive in the layout it prefers (format `any`), with a
// cached reorder from/to the graph's OHWI tensor as an extra step — weights are small.
// The forward builder also takes sum/relu post-ops (conv2d_epilogue, in fused.cpp). Inference
// convolutions run the implementation conv_algorithms.cpp chose (direct or Winograd); Winograd
// works on blocked copies of the activations in the executable's scratch arena.
#include <optional>

#include "backends/cpu/conv_algorithms.h"
#include "backends/cpu/conv_setup.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"

namespace trident::cpu {

using dnnl::convolution_backward_data;
using dnnl::convolution_backward_weights;
using dnnl::convolution_forward;

ConvSetup conv_setup(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y,
                     bool has_bias) {
  ConvSetup s;
  s.geom = conv_window(node, x, w, y);
  const int64_t groups = s.geom.groups;
  s.src = nhwc_md(x);
  s.weights = conv_weights_md(w, groups);
  s.dst = nhwc_md(y);
  if (has_bias) s.bias = plain_md({w[0]});
  s.groups = groups;
  s.kernel_h = w[1];
  s.kernel_w = w[2];
  s.sig = Signature("conv")
              .add("x", x)
              .add("w", w)
              .add("y", y)
              .add("bias", int64_t{has_bias})
              .add("groups", groups)
              .add("stride", s.geom.strides)
              .add("dil", s.geom.dilates)
              .add("pad_l", s.geom.pad_l)
              .add("pad_r", s.geom.pad_r)
              .str();
  return s;
}

void walk_forward_implementations(
    const ConvSetup& s, dnnl::prop_kind prop, const dnnl::primitive_attr& attr,
    dnnl::algorithm algorithm,
    const std::function<bool(const convolution_forward::primitive_desc&, int)>& visit) {
  const DnnlWindow& g = s.geom;
  const bool blocked = algorithm == dnnl::algorithm::convolution_winograd;
  const convolution_forward::desc d(prop, algorithm, blocked ? any_like(s.src) : s.src,
                                    any_like(s.weights), s.bias,
                                    blocked ? any_like(s.dst) : s.dst, g.strides, g.dilates,
                                    g.pad_l, g.pad_r);
  convolution_forward::primitive_desc pd(d, attr, OnednnContext::instance().engine());
  int position = 0;
  while (visit(pd, position) && pd.next_impl()) ++position;
}

convolution_forward::primitive_desc forward_pd(const ConvSetup& s, dnnl::prop_kind prop,
                                               const dnnl::primitive_attr& attr,
                                               dnnl::algorithm algorithm, int position) {
  std::optional<convolution_forward::primitive_desc> found;
  walk_forward_implementations(s, prop, attr, algorithm,
                               [&](const convolution_forward::primitive_desc& pd, int at) {
                                 if (at == position) found = pd;
                                 return at < position;
                               });
  if (!found) throw dnnl::error(dnnl_unimplemented, "no such convolution implementation");
  return *found;
}

ConvPostOps conv_post_ops(const ir::Node& node, const ops::ConvStages& stages) {
  ConvPostOps post{stages.residual != ops::ConvStages::Residual::none, stages.relu, static_cast<float>(stages.relu_max)};
  if (stages.activation) {
    const auto onednn = onednn_activation(stages.activation_params.fn);
    if (!onednn) fail(node, "oneDNN has no post-op for this activation");
    post.activation = onednn->first;
    post.activation_alpha = onednn->second;
  }
  return post;
}

void append_post_ops(dnnl::post_ops& chain, const ConvPostOps& post) {
  if (post.sum) chain.append_sum(1.f);
  if (post.relu && post.relu_max > 0) chain.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, post.relu_max);
  else if (post.relu) chain.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  else if (post.activation != dnnl::algorithm::undef) chain.append_eltwise(1.f, post.activation, post.activation_alpha, 0.f);
}

// The attributes of a forward conv with post-ops, applied in order: sum, then relu (or the
// activation in its place).
dnnl::primitive_attr post_ops_attr(const ConvPostOps& post) {
  dnnl::post_ops ops;
  append_post_ops(ops, post);
  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_post_ops(ops);
  return attr;
}

namespace {

// A kernel-owned copy of the OHWI weights in the layout `want` chosen by a primitive: a
// reorder step placed before the primitive's own step. None when the layouts already agree.
// Layouts oneDNN reaches only from OIHW (Winograd's) go through an OIHW copy at `via`.
Operand weights_as(PrimitiveKernel& k, const ConvSetup& s, const memory::desc& want,
                   const Operand& w, const std::string& tag,
                   const std::optional<ScratchRef>& via = std::nullopt) {
  if (want == s.weights) return w;
  memory buf = k.owned(want);
  std::optional<CachedPrimitive> direct;
  try {
    direct = reorder_primitive(s.sig + tag, s.weights, want);
  } catch (const dnnl::error&) {
    if (!via) throw;
  }
  if (direct) {
    k.add_step(*direct).bind(DNNL_ARG_FROM, s.weights, w).owned(DNNL_ARG_TO, buf).weight_prep();
    return buf;
  }
  const memory::desc oihw(s.weights.dims(), memory::data_type::f32,
                          s.groups == 1 ? Tag::oihw : Tag::goihw);
  k.add_step(reorder_primitive(s.sig + tag + ".oihw", s.weights, oihw))
      .bind(DNNL_ARG_FROM, s.weights, w)
      .bind(DNNL_ARG_TO, oihw, *via)
      .weight_prep();
  k.add_step(reorder_primitive(s.sig + tag + ".from_oihw", oihw, want))
      .bind(DNNL_ARG_FROM, oihw, *via)
      .owned(DNNL_ARG_TO, buf)
      .weight_prep();
  return buf;
}

// A convolution on blocked activations (Winograd's): reorders of the input (and of the
// accumulated residual) into the primitive's layout in the scratch arena, the convolution
// there, a reorder back. The weights' reorder runs in prepare() (constant inference weights).
void append_blocked_steps(PrimitiveKernel& k, const ConvSetup& s, const CachedPrimitive& p,
                          const std::string& key, const ConvOperands& ops, bool sum,
                          const std::shared_ptr<ScratchArena>& arena) {
  const memory::desc xb = p.pd.src_desc(), yb = p.pd.dst_desc();
  auto aligned = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const ScratchRef x_at{arena, 0}, y_at{arena, aligned(xb.get_size())},
      pad_at{arena, aligned(xb.get_size()) + aligned(yb.get_size())};
  // The weights first: their OIHW stop-over shares the scratch with the input's copy.
  const Operand weights =
      weights_as(k, s, p.pd.weights_desc(), ops.w, key.substr(s.sig.size()) + ".w",
                 ScratchRef{arena, 0});
  k.add_step(reorder_primitive(key + ".src", s.src, xb))
      .bind(DNNL_ARG_FROM, s.src, ops.x)
      .bind(DNNL_ARG_TO, xb, x_at);
  if (sum)
    k.add_step(reorder_primitive(key + ".acc", s.dst, yb))
        .bind(DNNL_ARG_FROM, s.dst, ops.y)
        .bind(DNNL_ARG_TO, yb, y_at);
  Step& step = k.add_step(p, pad_at);  // Winograd's transform buffers: the arena too
  step.bind(DNNL_ARG_SRC, xb, x_at)
      .bind(DNNL_ARG_WEIGHTS, p.pd.weights_desc(), weights)
      .bind(DNNL_ARG_DST, yb, y_at);
  if (ops.bias) step.bind(DNNL_ARG_BIAS, s.bias, *ops.bias);
  k.add_step(reorder_primitive(key + ".dst", yb, s.dst))
      .bind(DNNL_ARG_FROM, yb, y_at)
      .bind(DNNL_ARG_TO, s.dst, ops.y);
}

}  // namespace

void append_conv_forward(PrimitiveKernel& k, const ir::Node& node, const Shape& x,
                         const Shape& w, const Shape& y, const ConvOperands& ops,
                         const ConvPostOps& post, const ConvAlgorithms& algorithms) {
  const ConvSetup s = conv_setup(node, x, w, y, ops.bias.has_value());
  const bool inference =
      post.sum || post.relu || post.activation != dnnl::algorithm::undef || algorithms.options.constant_weights;
  CachedPrimitive p;
  std::string kind = "|fwd";
  bool blocked = false;
  if (inference) {
    kind = Signature("|infer")
               .add("sum", int64_t{post.sum})
               .add("relu", int64_t{post.relu})
               .add("relu_max", static_cast<double>(post.relu_max))
               .add("activation", static_cast<int64_t>(post.activation))
               .add("activation_alpha", static_cast<double>(post.activation_alpha))
               .str();
    const bool arena = algorithms.scratch != nullptr;  // blocked copies need it
    const BackendOptions& chosen = algorithms.options.backend;
    const ConvPlan plan = plan_inference_conv(s, post, s.sig + kind, arena ? chosen.winograd : 0,
                                              arena && chosen.times_candidates(), algorithms.options.build_bytes,
                                              chosen.plan_cache_dir);
    k.set_implementation(plan.note);
    p = plan.p;
    blocked = plan.blocked;
    kind = plan.key.substr(s.sig.size());
  } else {
    // The training forward (its pd also hints the backward primitives).
    p = OnednnContext::instance().get(s.sig + kind, [&] {
      return forward_pd(s, dnnl::prop_kind::forward_training);
    });
  }
  if (blocked) {
    append_blocked_steps(k, s, p, s.sig + kind, ops, post.sum, algorithms.scratch);
    return;
  }
  const Operand weights = weights_as(k, s, p.pd.weights_desc(), ops.w, kind + ".w");
  Step& step = k.add_step(p);
  step.bind(DNNL_ARG_SRC, s.src, ops.x)
      .bind(DNNL_ARG_WEIGHTS, p.pd.weights_desc(), weights)
      .bind(DNNL_ARG_DST, s.dst, ops.y);
  if (ops.bias) step.bind(DNNL_ARG_BIAS, s.bias, *ops.bias);
}

namespace {

// In an inference executable it runs the implementation timing chose, like conv2d_epilogue.
class Conv2d final : public PrimitiveKernel {
 public:
  Conv2d(const ir::Node& node, const ir::Graph& g, const CpuContext& ctx) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    ConvOperands ops{in(0), in(1), std::nullopt, out(0)};
    if (node.inputs.size() == 3) ops.bias = in(2);
    append_conv_forward(*this, node, in_shape(node, g, 0), in_shape(node, g, 1),
                        out_shape(node, g, 0), ops, {}, ConvAlgorithms::from(ctx));
  }
};

class Conv2dBackwardData final : public PrimitiveKernel {
 public:
  Conv2dBackwardData(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const ConvSetup s = conv_setup(node, out_shape(node, g, 0), in_shape(node, g, 1),
                                   in_shape(node, g, 0), false);
    const CachedPrimitive p = OnednnContext::instance().get(s.sig + "|bwd_data", [&] {
      const DnnlWindow& gm = s.geom;
      convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, s.src,
                                        any_like(s.weights), s.dst, gm.strides, gm.dilates,
                                        gm.pad_l, gm.pad_r);
      return convolution_backward_data::primitive_desc(
          d, user_scratchpad_attr(), OnednnContext::instance().engine(),
          forward_pd(s, dnnl::prop_kind::forward_training));
    });
    const Operand weights = weights_as(*this, s, p.pd.weights_desc(), in(1), "|bwd_data.w");
    add_step(p)
        .bind(DNNL_ARG_DIFF_DST, s.dst, in(0))
        .bind(DNNL_ARG_WEIGHTS, p.pd.weights_desc(), weights)
        .bind(DNNL_ARG_DIFF_SRC, s.src, out(0));
  }
};

class Conv2dBackwardWeight final : public PrimitiveKernel {
 public:
  Conv2dBackwardWeight(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    if (node.inputs.size() != 2)
      fail(node, "a weight gradient through a batchnorm prologue (defer_bn_apply) runs on cuda and cpu_ref only");
    const bool has_bias = node.outputs.size() == 2;
    if (has_bias != (node.attrs.i("has_bias", has_bias ? 1 : 0) != 0))
      fail(node, "attribute has_bias disagrees with the number of outputs");
    const ConvSetup s = conv_setup(node, in_shape(node, g, 0), out_shape(node, g, 0),
                                   in_shape(node, g, 1), has_bias);
    const CachedPrimitive p = OnednnContext::instance().get(s.sig + "|bwd_weights", [&] {
      const DnnlWindow& gm = s.geom;
      convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, s.src,
                                           any_like(s.weights), s.bias, s.dst, gm.strides,
                                           gm.dilates, gm.pad_l, gm.pad_r);
      return convolution_backward_weights::primitive_desc(
          d, user_scratchpad_attr(), OnednnContext::instance().engine(),
          forward_pd(s, dnnl::prop_kind::forward_training));
    });
    const memory::desc got = p.pd.diff_weights_desc();
    const bool reorder = got != s.weights;
    memory dw_buf;
    if (reorder) dw_buf = owned(got);
    Step& step = add_step(p);
    step.view(DNNL_ARG_SRC, s.src, in(0)).view(DNNL_ARG_DIFF_DST, s.dst, in(1));
    if (reorder)
      step.owned(DNNL_ARG_DIFF_WEIGHTS, dw_buf);
    else
      step.view(DNNL_ARG_DIFF_WEIGHTS, s.weights, out(0));
    if (has_bias) step.view(DNNL_ARG_DIFF_BIAS, s.bias, out(1));
    if (reorder)
      add_step(reorder_primitive(s.sig + "|bwd_weights.dw", got, s.weights))
          .owned(DNNL_ARG_FROM, dw_buf)
          .view(DNNL_ARG_TO, s.weights, out(0));
  }
};

}  // namespace

void register_conv_kernels() {
  add_kernel<Conv2d>("conv2d");
  add_kernel<Conv2dBackwardData>("conv2d_backward_data");
  add_kernel<Conv2dBackwardWeight>("conv2d_backward_weight");
}

}  // namespace trident::cpu
