// batchnorm2d (training and inference) and its backward on oneDNN batch_normalization, bn_relu
// (ops/bn_relu.cpp), the same primitive with fuse_norm_relu, and batchnorm_relu_backward, the
// backward after the relu's. oneDNN speaks mean/variance while the graph keeps saved_invstd,
// so the kernels convert through a kernel-owned [C] variance buffer; the running-stat update
// is a host loop.
#include <cmath>
#include <optional>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/bn_relu_operands.h"
#include "ops/cbr_operands.h"
#include "ops/norm_params.h"

namespace trident::cpu {

namespace {

using dnnl::batch_normalization_backward;
using dnnl::batch_normalization_forward;
using dnnl::normalization_flags;

const normalization_flags kAffine = normalization_flags::use_scale | normalization_flags::use_shift;

std::string bn_signature(const char* kind, const Shape& x, double eps) {
  return Signature(kind).add("x", x).add("eps", eps).str();
}

batch_normalization_forward::primitive_desc training_pd(const memory::desc& data, double eps,
                                                        bool fuse_relu = false) {
  batch_normalization_forward::desc d(
      dnnl::prop_kind::forward_training, data, static_cast<float>(eps),
      fuse_relu ? kAffine | normalization_flags::fuse_norm_relu : kAffine);
  return batch_normalization_forward::primitive_desc(d, user_scratchpad_attr(),
                                                     OnednnContext::instance().engine());
}

float* floats(const KernelArgs& args, ViewRef r) { return resolve(args, r).as<float>(); }

}  // namespace

BnTraining::BnTraining(PrimitiveKernel& k, const ir::Node& node, const Shape& x,
                       const BnTrainingOperands& ops, bool fuse_relu)
    : ops_(ops),
      eps_(ops::NormParams::of(node).eps),
      momentum_(ops::NormParams::of(node).momentum),
      C_(x[3]),
      M_(x[0] * x[1] * x[2]) {
  if (M_ < 2)
    fail(node, "training needs more than one value per channel (N·H·W = " + std::to_string(M_) + ")");
  const memory::desc data = nhwc_md(x), vec = plain_md({C_});
  const auto pd = training_pd(data, eps_, fuse_relu);
  const CachedPrimitive p = OnednnContext::instance().get(
      bn_signature(fuse_relu ? "bnorm_train_relu" : "bnorm_train", x, eps_), [&] { return pd; });
  var_ = k.owned(vec);
  auto& step = k.add_step(p)
                   .bind(DNNL_ARG_SRC, data, ops.x)
                   .bind(DNNL_ARG_DST, data, ops.y)
                   .view(DNNL_ARG_SCALE, vec, ops.gamma)
                   .view(DNNL_ARG_SHIFT, vec, ops.beta)
                   .view(DNNL_ARG_MEAN, vec, ops.saved_mean)
                   .owned(DNNL_ARG_VARIANCE, var_);
  if (fuse_relu) step.owned(DNNL_ARG_WORKSPACE, k.owned(pd.workspace_desc()));
}

void BnTraining::finish(const KernelArgs& args) const {
  // saved_invstd from the biased variance; running statistics (outputs usually alias the
  // inputs: each element is read before it is written).
  const float* var = static_cast<const float*>(var_.get_data_handle());
  const float* mean = floats(args, ops_.saved_mean);
  float* invstd = floats(args, ops_.saved_invstd);
  const float* rm_in = floats(args, ops_.running_mean);
  const float* rv_in = floats(args, ops_.running_var);
  float* rm_out = floats(args, ops_.running_mean_out);
  float* rv_out = floats(args, ops_.running_var_out);
  const double m = momentum_;
  const double unbias = static_cast<double>(M_) / static_cast<double>(M_ - 1);
  const float* bias = ops_.cancelled_bias ? floats(args, *ops_.cancelled_bias) : nullptr;
  const float bias_weight = static_cast<float>(m);
  for (int64_t c = 0; c < C_; ++c) {
    invstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + eps_));
    rm_out[c] = static_cast<float>((1.0 - m) * rm_in[c] + m * mean[c]);
    if (bias) rm_out[c] += bias_weight * bias[c];  // as the decomposition rounds it: f32 mul, f32 add
    rv_out[c] = static_cast<float>((1.0 - m) * rv_in[c] + m * var[c] * unbias);
  }
}

BnBackward::BnBackward(PrimitiveKernel& k, const ir::Node& node, const Shape& x,
                       const BnBackwardOperands& ops)
    : saved_invstd_(ops.saved_invstd), eps_(ops::NormParams::of(node).eps), C_(x[3]) {
  const memory::desc data = nhwc_md(x), vec = plain_md({C_});
  OnednnContext& ctx = OnednnContext::instance();
  const CachedPrimitive p = ctx.get(bn_signature("bnorm_bwd", x, eps_), [&] {
    batch_normalization_backward::desc d(dnnl::prop_kind::backward, data, data,
                                         static_cast<float>(eps_), kAffine);
    return batch_normalization_backward::primitive_desc(d, user_scratchpad_attr(), ctx.engine(),
                                                        training_pd(data, eps_));
  });
  var_ = k.owned(vec);
  // oneDNN 2.6 asks for the shift with use_shift even in backward, where it is unused;
  // beta is not an input of the backward op, so it gets a zero buffer of its own.
  const memory unused_shift = k.owned(vec);
  float* zero = static_cast<float*>(unused_shift.get_data_handle());
  for (int64_t c = 0; c < C_; ++c) zero[c] = 0.f;
  k.add_step(p)
      .bind(DNNL_ARG_SRC, data, ops.x)
      .bind(DNNL_ARG_DIFF_DST, data, ops.dy)
      .view(DNNL_ARG_SCALE, vec, ops.gamma)
      .owned(DNNL_ARG_SHIFT, unused_shift)
      .view(DNNL_ARG_MEAN, vec, ops.saved_mean)
      .owned(DNNL_ARG_VARIANCE, var_)
      .bind(DNNL_ARG_DIFF_SRC, data, ops.dx)
      .view(DNNL_ARG_DIFF_SCALE, vec, ops.dgamma)
      .view(DNNL_ARG_DIFF_SHIFT, vec, ops.dbeta);
}

void BnBackward::prepare(const KernelArgs& args) const {
  // oneDNN wants the variance: var = 1/invstd² − eps (it adds eps back).
  const float* invstd = floats(args, saved_invstd_);
  float* var = static_cast<float*>(var_.get_data_handle());
  for (int64_t c = 0; c < C_; ++c) {
    const double s = invstd[c];
    var[c] = static_cast<float>(1.0 / (s * s) - eps_);
  }
}

namespace {

// batchnorm2d, and bn_relu: the relu inside the same pass (one layout of operands for both).
class Batchnorm2d final : public PrimitiveKernel {
 public:
  Batchnorm2d(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const Shape& x = in_shape(node, g, 0);
    const bool relu = node.op == "bn_relu";
    if (relu && ops::BnReluParams::of(node).bit_mask)
      fail(node, "a packed relu mask (pack_relu_mask) is kept on the cuda and cpu_ref backends only");
    const bool training = node.attrs.i("training", node.outputs.size() == 5 ? 1 : 0) != 0;
    if (node.inputs.size() != 5 || node.outputs.size() != (training ? 5u : 1u))
      fail(node, std::string("expected 5 inputs and ") +
                     (training ? "5 outputs (training)" : "1 output (inference)"));
    if (training) {
      training_.emplace(*this, node, x,
                        BnTrainingOperands{in(0), in(1), in(2), in(3), in(4), out(0), out(1),
                                           out(2), out(3), out(4), std::nullopt},
                        relu);
      return;
    }
    const double eps = ops::NormParams::of(node).eps;
    const memory::desc data = nhwc_md(x), vec = plain_md({x[3]});
    OnednnContext& ctx = OnednnContext::instance();
    const normalization_flags flags = relu ? kAffine | normalization_flags::use_global_stats |
                                                 normalization_flags::fuse_norm_relu
                                           : kAffine | normalization_flags::use_global_stats;
    add_step(ctx.get(bn_signature(relu ? "bnorm_infer_relu" : "bnorm_infer", x, eps), [&] {
      batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data,
                                          static_cast<float>(eps), flags);
      return batch_normalization_forward::primitive_desc(d, user_scratchpad_attr(), ctx.engine());
    }))
        .view(DNNL_ARG_SRC, data, in(0))
        .view(DNNL_ARG_DST, data, out(0))
        .view(DNNL_ARG_SCALE, vec, in(1))
        .view(DNNL_ARG_SHIFT, vec, in(2))
        .view(DNNL_ARG_MEAN, vec, in(3))
        .view(DNNL_ARG_VARIANCE, vec, in(4));
  }

  void run(const KernelArgs& args) override {
    execute(args);
    if (training_) training_->finish(args);
  }

 private:
  std::optional<BnTraining> training_;
};

// batchnorm2d_backward (x, dy, gamma, saved_mean, saved_invstd → dx, dgamma, dbeta), and
// batchnorm_relu_backward (ops/bn_relu_backward_stages.h), the same primitive after the relu's
// backward: dz = (dy [+ dy_other])·(y > 0) (0 < y < relu_max when clipped) goes to dresidual
// when the node gives one (it is exactly the residual's gradient), else to a kernel-owned
// buffer; the sum of two gradients is made there first and masked in place.
class BatchnormBackward final : public PrimitiveKernel {
 public:
  BatchnormBackward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    if (node.op == "batchnorm2d_backward") {
      if (node.inputs.size() != 5 || node.outputs.size() != 3)
        fail(node, "expected 5 inputs (x, dy, gamma, saved_mean, saved_invstd) and 3 outputs");
      bwd_.emplace(*this, node, in_shape(node, g, 0),
                   BnBackwardOperands{in(0), in(1), in(2), in(3), in(4), out(0), out(1), out(2)});
      return;
    }
    namespace i = ops::bn_relu_bwd_in;
    namespace o = ops::bn_relu_bwd_out;
    using Stages = ops::BnReluBackwardStages;
    const Stages stages = Stages::of(node, g);
    if (stages.mask == Stages::Mask::affine)
      fail(node, "a relu mask recomputed from the affine (defer_bn_apply) runs on cuda and cpu_ref only");
    if (stages.dy == Stages::Dy::pooled)
      fail(node, "a gradient routed through a max pooling's window index (fold_maxpool_gradient) runs on cuda and cpu_ref only");
    const Shape& x = in_shape(node, g, i::conv_out);
    const int64_t n = trident::numel(x);
    Operand dz_flat = out(o::dresidual), dz_nhwc = out(o::dresidual);
    if (!stages.residual_gradient) {
      const memory flat = owned(flat_md(n));
      dz_flat = flat;
      // The same bytes described as NHWC for the batchnorm step.
      dz_nhwc = memory(nhwc_md(x), OnednnContext::instance().engine(), flat.get_data_handle());
    }
    const float relu_max = static_cast<float>(stages.relu_max);
    if (stages.dy == Stages::Dy::plus_other) {
      append_add(*this, n, in(i::dy), in(i::dy_other), dz_flat);
      append_relu_backward(*this, n, in(i::mask), dz_flat, dz_flat, relu_max);
    } else {
      append_relu_backward(*this, n, in(i::mask), in(i::dy), dz_flat, relu_max);
    }
    bwd_.emplace(*this, node, x,
                 BnBackwardOperands{in(i::conv_out), dz_nhwc, in(i::gamma), in(i::saved_mean), in(i::saved_invstd),
                                    out(o::dconv), out(o::dgamma), out(o::dbeta)});
  }

  void run(const KernelArgs& args) override {
    check_views(args);
    bwd_->prepare(args);
    execute(args);
  }

 private:
  std::optional<BnBackward> bwd_;
};

}  // namespace

void register_batchnorm_kernels() {
  add_kernel<Batchnorm2d>({"batchnorm2d", "bn_relu"});
  add_kernel<BatchnormBackward>({"batchnorm2d_backward", "batchnorm_relu_backward"});
}

}  // namespace trident::cpu
