// The cuda backend's batchnorm family: batchnorm2d (training and inference),
// batchnorm2d_backward and the fused batchnorm_relu_backward. Each kernel
// plans its per-channel reduction when built (and reserves the workspace it needs); run()
// enqueues the partial-sum, finalize and apply kernels of device/batchnorm_*.cu, with sync-BN's
// collective between the sums and the finalize where the batch spans ranks (batchnorm_rank_sum.h).
#include <memory>

#include "backends/cuda/batchnorm_rank_sum.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pool_geometry.h"
#include "core/relu_mask.h"
#include "core/window_index.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"
#include "ops/norm_params.h"

namespace trident::cuda {

namespace {

using device::ChannelTensor;
using device::ElemType;

// The activation [N,H,W,C] of a batchnorm node seen as [M, C].
struct RowsByChannels {
  int64_t M = 0, C = 0;
};

RowsByChannels rows_by_channels(const ir::Node& node, const ir::Value& x) {
  if (x.shape.size() != 4) fail(node, "'" + x.name + "' must be rank 4 (NHWC), got " + shape_str(x.shape));
  return {x.shape[0] * x.shape[1] * x.shape[2], x.shape[3]};
}

class BatchNormForward final : public Kernel {
 public:
  BatchNormForward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    training_ = node.attrs.i("training", node.outputs.size() == 5 ? 1 : 0) != 0;
    expect_arity(node, 5, 5, training_ ? 5 : 1, training_ ? 5 : 1);
    const ir::Value& x = input_value(node, g, 0);
    act_ = elem_of(node, x, "input");
    expect_dtype(node, output_value(node, g, 0), x.dtype, "output");
    expect_shape(node, output_value(node, g, 0), x.shape, "output");
    const auto [M, C] = rows_by_channels(node, x);
    const char* in_names[] = {"x", "gamma", "beta", "running_mean", "running_var"};
    for (size_t i = 1; i < 5; ++i) in_types_[i - 1] = channel_type(node, input_value(node, g, i), C, in_names[i]);
    eps_ = ops::NormParams::of(node).eps;
    momentum_ = ops::NormParams::of(node).momentum;
    plan_ = device::plan_channel_reduction(M, C, act_, ctx.sm_count());
    if (training_) {
      if (M < 2)
        fail(node, "training needs more than one value per channel (N·H·W = " + std::to_string(M) +
                       "); use a larger batch or inference mode");
      for (size_t i = 1; i < 5; ++i) out_types_[i - 1] = channel_type(node, output_value(node, g, i), C, "statistic");
      ctx.reserve_workspace(0, plan_.workspace_bytes);
    }
    over_ranks_ = BatchnormRankSum::make(node, training_, ctx);
  }

  void run(const KernelArgs& a) override {
    auto ch = [](const TensorView& v, ElemType t) { return ChannelTensor{v.data, t}; };
    if (!training_) {
      device::launch_batchnorm_infer(act_, plan_, inputs<device::BatchNormInferArgs>(a), ctx_.stream());
      return;
    }
    auto args = inputs<device::BatchNormTrainArgs>(a);
    args.saved_mean = ch(a.out[1], out_types_[0]);
    args.saved_invstd = ch(a.out[2], out_types_[1]);
    args.running_mean_out = ch(a.out[3], out_types_[2]);
    args.running_var_out = ch(a.out[4], out_types_[3]);
    args.momentum = momentum_;
    device::launch_batchnorm_train(act_, plan_, args, ctx_.workspace(0), ctx_.stream(),
                                   over_ranks_ ? &over_ranks_->device_hook() : nullptr);
  }

  std::string implementation() const override {
    return over_ranks_ ? "batchnorm training kernels, " + over_ranks_->describe() : std::string();
  }

 private:
  // x, y, the four per-channel inputs and eps: what inference and training both take.
  template <class Args>
  Args inputs(const KernelArgs& a) const {
    Args args;
    args.x = a.in[0].data;
    args.y = a.out[0].data;
    args.gamma = {a.in[1].data, in_types_[0]};
    args.beta = {a.in[2].data, in_types_[1]};
    args.running_mean = {a.in[3].data, in_types_[2]};
    args.running_var = {a.in[4].data, in_types_[3]};
    args.eps = eps_;
    return args;
  }

  CudaContext& ctx_;
  bool training_ = true;
  ElemType act_ = ElemType::f32;
  ElemType in_types_[4] = {}, out_types_[4] = {};
  double eps_ = 1e-5, momentum_ = 0.1;
  device::ChannelReductionPlan plan_;
  std::unique_ptr<BatchnormRankSum> over_ranks_;  // sync-BN, or null
};

// batchnorm2d_backward (x, dy, gamma, saved_mean, saved_invstd → dx, dgamma, dbeta) and
// batchnorm_relu_backward (y, dy, conv_out, gamma, saved_mean, saved_invstd, [dy_other] →
// dconv, dgamma, dbeta, [dresidual]): the same kernels, with the fused op's stages
// (ops/bn_relu_backward_stages.h) — dy plus dy_other, or a max pooling's gradient that the
// batchnorm kernels route to the cells its window index names; the gradient masked with y > 0
// (0 < y < relu_max for a clipped relu) from y, its packed bits or the affine that recomputes y
// from conv_out. The graph's verifier has checked the operands' shapes; the kernel checks what
// it can run (one activation dtype, channel vectors it reads).
template <bool FusedRelu>
class BatchNormBackward final : public Kernel {
 public:
  using Stages = ops::BnReluBackwardStages;

  BatchNormBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    if (FusedRelu) stages_ = Stages::of(node, g);
    const size_t inputs = FusedRelu ? stages_.inputs() : 5, outputs = stages_.outputs();
    expect_arity(node, inputs, inputs, outputs, outputs);
    const ir::Value& x = input_value(node, g, kX);
    act_ = elem_of(node, x, "input");
    const auto [M, C] = rows_by_channels(node, x);
    // dy (and the relu output y of the fused op) match x; so do dx and dresidual.
    std::vector<size_t> activations;
    if (stages_.dy == Stages::Dy::pooled) {
      const ir::Value& dy = input_value(node, g, kDy);
      expect_dtype(node, dy, x.dtype, "gradient");
      dy_window_ = pool_geometry(node, x.shape, dy.shape);
    } else {
      activations.push_back(kDy);
    }
    if (stages_.dy == Stages::Dy::plus_other) activations.push_back(ops::bn_relu_bwd_in::dy_other);
    if (FusedRelu && stages_.mask == Stages::Mask::relu_output) activations.push_back(ops::bn_relu_bwd_in::mask);
    if (stages_.mask == Stages::Mask::bits) mask_row_bytes_ = relu_mask_words(C) * 4;
    for (size_t i : activations) {
      expect_dtype(node, input_value(node, g, i), x.dtype, "input");
      expect_shape(node, input_value(node, g, i), x.shape, "input");
    }
    std::vector<size_t> gradients{0};
    if (stages_.residual_gradient) gradients.push_back(3);
    for (size_t o : gradients) {
      expect_dtype(node, output_value(node, g, o), x.dtype, "gradient");
      expect_shape(node, output_value(node, g, o), x.shape, "gradient");
    }
    gamma_t_ = channel_type(node, input_value(node, g, kGamma), C, "gamma");
    mean_t_ = channel_type(node, input_value(node, g, kGamma + 1), C, "saved_mean");
    invstd_t_ = channel_type(node, input_value(node, g, kGamma + 2), C, "saved_invstd");
    dgamma_t_ = channel_type(node, output_value(node, g, 1), C, "dgamma");
    dbeta_t_ = channel_type(node, output_value(node, g, 2), C, "dbeta");
    plan_ = device::plan_channel_reduction(M, C, act_, ctx.sm_count());
    ctx.reserve_workspace(0, plan_.workspace_bytes);
    over_ranks_ = BatchnormRankSum::make(node, true, ctx);
  }

  void run(const KernelArgs& a) override {
    device::BatchNormBackwardArgs args;
    args.x = a.in[kX].data;
    args.dy = a.in[kDy].data;
    if (stages_.dy == Stages::Dy::plus_other) args.dy_other = a.in[ops::bn_relu_bwd_in::dy_other].data;
    if (stages_.dy == Stages::Dy::pooled) {
      args.dy_window_index = a.in[ops::bn_relu_bwd_in::dy_window_index].data;
      args.dy_window = dy_window_;
    }
    if (FusedRelu && stages_.mask == Stages::Mask::affine) {
      args.relu_affine = static_cast<const float*>(a.in[ops::bn_relu_bwd_in::mask].data);
    } else if (FusedRelu && stages_.mask == Stages::Mask::bits) {
      args.relu_bits = a.in[ops::bn_relu_bwd_in::mask].data;
      args.relu_bits_row_bytes = mask_row_bytes_;
    } else if (FusedRelu) {
      args.relu_output = a.in[ops::bn_relu_bwd_in::mask].data;
      args.relu_max = static_cast<float>(stages_.relu_max);
    }
    args.dx = a.out[0].data;
    args.dresidual = stages_.residual_gradient ? a.out[ops::bn_relu_bwd_out::dresidual].data : nullptr;
    args.gamma = {a.in[kGamma].data, gamma_t_};
    args.saved_mean = {a.in[kGamma + 1].data, mean_t_};
    args.saved_invstd = {a.in[kGamma + 2].data, invstd_t_};
    args.dgamma = {a.out[1].data, dgamma_t_};
    args.dbeta = {a.out[2].data, dbeta_t_};
    device::launch_batchnorm_backward(act_, plan_, args, ctx_.workspace(0), ctx_.stream(),
                                      over_ranks_ ? &over_ranks_->device_hook() : nullptr);
  }

  std::string implementation() const override {
    return over_ranks_ ? "batchnorm backward kernels, " + over_ranks_->describe() : std::string();
  }

 private:
  // Input positions: the fused op (ops/cbr_operands.h) starts with its mask and has conv_out
  // where the plain op has x.
  static constexpr size_t kX = FusedRelu ? ops::bn_relu_bwd_in::conv_out : 0;
  static constexpr size_t kDy = ops::bn_relu_bwd_in::dy;
  static constexpr size_t kGamma = FusedRelu ? ops::bn_relu_bwd_in::gamma : 2;

  CudaContext& ctx_;
  Stages stages_;  // batchnorm2d_backward: no relu, dy as given
  device::PoolGeometry dy_window_;  // a pooled dy: how conv_out's cells pool into it
  int64_t mask_row_bytes_ = 0;      // packed bits: one row's bytes
  ElemType act_ = ElemType::f32;
  ElemType gamma_t_{}, mean_t_{}, invstd_t_{}, dgamma_t_{}, dbeta_t_{};
  device::ChannelReductionPlan plan_;
  std::unique_ptr<BatchnormRankSum> over_ranks_;  // sync-BN, or null
};

}  // namespace

void register_batchnorm_kernels() {
  add_kernel<BatchNormForward>("batchnorm2d");
  add_kernel<BatchNormBackward<false>>("batchnorm2d_backward");
  add_kernel<BatchNormBackward<true>>("batchnorm_relu_backward");
}

}  // namespace trident::cuda
