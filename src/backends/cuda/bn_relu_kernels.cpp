// bn_relu (ops/bn_relu.cpp) on the GPU, composed from the launchers cbr already runs after its
// convolution, so the two fusions share their arithmetic: training is the channel-sums kernel
// over x (Σ, Σ² in a fixed order), cbr's finalize (saved and running statistics, per-channel
// scale and shift; under sync-BN Σ, Σ² first summed over the ranks, batchnorm_rank_sum.h) and one apply y = relu(x·scale + shift) that also writes the packed relu
// mask where the node keeps one; inference is the batchnorm inference kernel and a relu in place.
#include <array>

#include "backends/cuda/batchnorm_rank_sum.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "core/relu_mask.h"
#include "ops/bn_relu_operands.h"

namespace trident::cuda {

namespace {

namespace in = ops::bn_relu_in;
namespace out = ops::bn_relu_out;

class BnReluKernel final : public Kernel {
 public:
  BnReluKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    params_ = ops::BnReluParams::of(node);
    expect_arity(node, 5, 5, params_.outputs(), params_.outputs());
    const ir::Value& x = input_value(node, g, in::x);
    if (x.shape.size() != 4) fail(node, "'" + x.name + "' must be rank 4 (NHWC), got " + shape_str(x.shape));
    io_ = elem_of(node, x, "the input");
    expect_dtype(node, output_value(node, g, out::y), x.dtype, "the output y");
    expect_shape(node, output_value(node, g, out::y), x.shape, "the output y");
    rows_ = x.shape[0] * x.shape[1] * x.shape[2];
    channels_ = x.shape[3];
    const char* in_names[] = {"", "gamma", "beta", "running_mean", "running_var"};
    for (size_t i = in::gamma; i <= in::running_var; ++i)
      in_types_[i] = channel_type(node, input_value(node, g, i), channels_, in_names[i]);
    if (!(params_.eps > 0)) fail(node, "attribute eps must be positive");
    if (!params_.training) {
      plan_ = device::plan_channel_reduction(rows_, channels_, io_, ctx.sm_count());
      return;
    }
    if (rows_ < 2)
      fail(node, "training batchnorm needs more than one value per channel (N·H·W = " + std::to_string(rows_) +
                     "); use a larger batch");
    const char* out_names[] = {"", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out"};
    for (size_t o = out::saved_mean; o <= out::running_var; ++o)
      out_types_[o] = channel_type(node, output_value(node, g, o), channels_, out_names[o]);
    if (params_.bit_mask) {
      const ir::Value& mask = output_value(node, g, out::relu_mask);
      if (mask.dtype != DType::i32 || mask.shape != relu_mask_shape(x.shape))
        fail(node, "the relu mask must be i32 " + shape_str(relu_mask_shape(x.shape)));
      if (channels_ % 8 != 0) fail(node, "a packed relu mask needs a multiple of 8 channels");
      mask_row_bytes_ = relu_mask_words(channels_) * 4;
    }
    WorkspaceLayout layout;
    partials_offset_ = layout.add(device::channel_sums_scratch_bytes(rows_, channels_));
    const size_t channel_bytes = static_cast<size_t>(channels_) * sizeof(float);
    sum_offset_ = layout.add(channel_bytes);
    sq_sum_offset_ = layout.add(channel_bytes);
    scale_offset_ = layout.add(channel_bytes);
    shift_offset_ = layout.add(channel_bytes);
    ctx.reserve_workspace(0, layout.total());
    over_ranks_ = BatchnormRankSum::make(node, true, ctx);
  }

  void run(const KernelArgs& a) override {
    if (a.in.size() != 5 || a.out.size() != params_.outputs())
      fail(a.node, "was built for 5 inputs and " + std::to_string(params_.outputs()) + " outputs but runs with " +
                       std::to_string(a.in.size()) + " and " + std::to_string(a.out.size()));
    if (params_.training) {
      enqueue_training(a);
      return;
    }
    device::BatchNormInferArgs infer;
    infer.x = a.in[in::x].data;
    infer.y = a.out[out::y].data;
    infer.gamma = {a.in[in::gamma].data, in_types_[in::gamma]};
    infer.beta = {a.in[in::beta].data, in_types_[in::beta]};
    infer.running_mean = {a.in[in::running_mean].data, in_types_[in::running_mean]};
    infer.running_var = {a.in[in::running_var].data, in_types_[in::running_var]};
    infer.eps = params_.eps;
    device::launch_batchnorm_infer(io_, plan_, infer, ctx_->stream());
    device::launch_relu(io_, a.out[out::y].data, a.out[out::y].data, rows_ * channels_, ctx_->stream());
  }

  std::string implementation() const override {
    if (!params_.training) return "batchnorm inference kernel, relu in place";
    return over_ranks_ ? "channel-sums, finalize and apply kernels, " + over_ranks_->describe()
                       : "channel-sums, finalize and apply kernels";
  }

 private:
  void enqueue_training(const KernelArgs& a) {
    void* ws = ctx_->workspace(0);
    float* sum = at_offset<float>(ws, sum_offset_);
    float* sq_sum = at_offset<float>(ws, sq_sum_offset_);
    device::launch_channel_sums(io_, a.in[in::x].data, rows_, channels_, at_offset<float>(ws, partials_offset_), sum,
                                sq_sum, ctx_->stream());
    if (over_ranks_) over_ranks_->sum_in_place({sum, sq_sum}, static_cast<size_t>(channels_));
    device::BnFinalizeArgs f;
    f.sum = sum;
    f.sq_sum = sq_sum;
    f.count = over_ranks_ ? rows_ * over_ranks_->ranks() : rows_;
    f.channels = channels_;
    f.eps = params_.eps;
    f.momentum = params_.momentum;
    f.gamma = {a.in[in::gamma].data, in_types_[in::gamma]};
    f.beta = {a.in[in::beta].data, in_types_[in::beta]};
    f.running_mean_in = {a.in[in::running_mean].data, in_types_[in::running_mean]};
    f.running_var_in = {a.in[in::running_var].data, in_types_[in::running_var]};
    f.saved_mean = {a.out[out::saved_mean].data, out_types_[out::saved_mean]};
    f.saved_invstd = {a.out[out::saved_invstd].data, out_types_[out::saved_invstd]};
    f.running_mean_out = {a.out[out::running_mean].data, out_types_[out::running_mean]};
    f.running_var_out = {a.out[out::running_var].data, out_types_[out::running_var]};
    f.scale = at_offset<float>(ws, scale_offset_);
    f.shift = at_offset<float>(ws, shift_offset_);
    device::launch_bn_finalize(f, ctx_->stream());

    device::ChannelAffineArgs apply;
    apply.io = io_;
    apply.x = a.in[in::x].data;
    apply.scale = f.scale;
    apply.shift = f.shift;
    apply.shift_type = device::ElemType::f32;
    apply.y = a.out[out::y].data;
    apply.rows = rows_;
    apply.channels = channels_;
    apply.relu = true;
    if (params_.bit_mask) {
      apply.mask = a.out[out::relu_mask].data;
      apply.mask_row_bytes = mask_row_bytes_;
    }
    device::launch_channel_affine(apply, ctx_->stream());
  }

  CudaContext* ctx_;
  ops::BnReluParams params_;
  device::ElemType io_ = device::ElemType::f32;
  std::array<device::ElemType, 5> in_types_{}, out_types_{};
  int64_t rows_ = 0, channels_ = 0, mask_row_bytes_ = 0;
  device::ChannelReductionPlan plan_;  // inference only
  size_t partials_offset_ = 0, sum_offset_ = 0, sq_sum_offset_ = 0, scale_offset_ = 0, shift_offset_ = 0;
  std::unique_ptr<BatchnormRankSum> over_ranks_;  // sync-BN, or null
};

}  // namespace

void register_bn_relu_kernels() { add_kernel<BnReluKernel>("bn_relu"); }

}  // namespace trident::cuda
