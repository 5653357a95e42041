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
// dconv, dgamma, dbeta, [dresidual]): the same kernels, the fused op adding dy_other to dy
// when it has one and masking the gradient with y > 0 first — y itself, its packed bits
// (an i32 mask input, core/relu_mask.h), or the affine [2, C] f32 that recomputes y from
// conv_out (defer_bn_apply). With relu_max (a clipped relu, ReLU6) the mask is 0 < y < relu_max.
// With pooled_dy (fold_maxpool_gradient) dy is a max pooling's gradient, routed to the cells
// its window index (in dy_other's place) names by the batchnorm kernels themselves.
template <bool FusedRelu>
class BatchNormBackward final : public Kernel {
 public:
  BatchNormBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    residual_ = FusedRelu && node.attrs.i("residual", 0) != 0;
    constexpr size_t inputs = FusedRelu ? 6 : 5;
    const size_t outputs = residual_ ? 4 : 3;
    expect_arity(node, inputs, FusedRelu ? inputs + 1 : inputs, outputs, outputs);
    pooled_ = FusedRelu && ops::has_pooled_dy(node);
    two_gradients_ = FusedRelu && !pooled_ && node.inputs.size() == inputs + 1;
    if (pooled_ && node.inputs.size() != inputs + 1) fail(node, "a pooled gradient needs the pooling's window index");
    const ir::Value& x = input_value(node, g, kX);
    act_ = elem_of(node, x, "input");
    const auto [M, C] = rows_by_channels(node, x);
    // dy (and the relu output y of the fused op) match x; so do dx and dresidual.
    std::vector<size_t> activations;
    if (pooled_) {
      const ir::Value &dy = input_value(node, g, kDy), &index = input_value(node, g, inputs);
      expect_dtype(node, dy, x.dtype, "gradient");
      dy_window_ = pool_geometry(node, x.shape, dy.shape);
      if (dy_window_.R * dy_window_.S > kMostWindowCells) fail(node, "the pooling window has more cells than a window index names");
      if (index.dtype != DType::i32 || index.shape != window_index_shape(numel(dy.shape)))
        fail(node, "the window index must be i32 " + shape_str(window_index_shape(numel(dy.shape))));
    } else {
      activations.push_back(kDy);
    }
    bit_mask_ = FusedRelu && input_value(node, g, 0).dtype == DType::i32;
    affine_mask_ = FusedRelu && input_value(node, g, 0).shape.size() == 2;
    if (affine_mask_) {
      const ir::Value& affine = input_value(node, g, 0);
      if (affine.dtype != DType::f32 || affine.shape != Shape{2, C})
        fail(node, "the affine that gives the relu mask must be f32 [2," + std::to_string(C) + "]");
    } else if (bit_mask_) {
      const ir::Value& mask = input_value(node, g, 0);
      if (mask.shape != relu_mask_shape(x.shape))
        fail(node, "the packed relu mask must have shape " + shape_str(relu_mask_shape(x.shape)));
      mask_row_bytes_ = relu_mask_words(C) * 4;
    } else if (FusedRelu) {
      activations.push_back(0);
      relu_max_ = static_cast<float>(node.attrs.f("relu_max", 0.0));
    }
    if (node.attrs.has("relu_max") && !(relu_max_ > 0))
      fail(node, "a clipped relu (relu_max) is masked from its output y, with relu_max positive");
    if (two_gradients_) activations.push_back(inputs);
    for (size_t i : activations) {
      expect_dtype(node, input_value(node, g, i), x.dtype, "input");
      expect_shape(node, input_value(node, g, i), x.shape, "input");
    }
    std::vector<size_t> gradients{0};
    if (residual_) gradients.push_back(3);
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
    if (two_gradients_) args.dy_other = a.in.back().data;
    if (pooled_) {
      args.dy_window_index = a.in.back().data;
      args.dy_window = dy_window_;
    }
    if (affine_mask_) {
      args.relu_affine = static_cast<const float*>(a.in[0].data);
    } else if (bit_mask_) {
      args.relu_bits = a.in[0].data;
      args.relu_bits_row_bytes = mask_row_bytes_;
    } else if (FusedRelu) {
      args.relu_output = a.in[0].data;
      args.relu_max = relu_max_;
    }
    args.dx = a.out[0].data;
    args.dresidual = residual_ ? a.out[3].data : nullptr;
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
  bool residual_ = false, two_gradients_ = false, bit_mask_ = false, affine_mask_ = false, pooled_ = false;
  device::PoolGeometry dy_window_;  // pooled_: how conv_out's cells pool into dy
  int64_t mask_row_bytes_ = 0;
  float relu_max_ = 0.f;  // a clipped relu's bound (ReLU6), 0 for a plain relu
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
