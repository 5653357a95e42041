// cbr_weight_backward on the GPU: a first layer's batchnorm-relu backward and weight gradient
// in one pass over dy and conv_out on the tensor cores (device/small_channel_conv.h), never
// writing dconv. The pass fuses only shapes the kernel takes (ops/cbr_weight_backward.h); a
// graph built otherwise is refused with that reason. Under sync-BN the two batchnorm sums are
// added over the ranks before the combination, as batchnorm_relu_backward adds its own.
#include <memory>

#include "backends/cuda/batchnorm_rank_sum.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/device/small_channel_conv.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "core/relu_mask.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"

namespace trident::cuda {

namespace {

namespace in = ops::cbr_weight_bwd_in;
namespace out = ops::cbr_weight_bwd_out;

class CbrWeightBackward final : public Kernel {
 public:
  CbrWeightBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, in::x + 1, in::x + 1, out::dbeta + 1, out::dbeta + 1);
    const ir::Value &conv_out = input_value(node, g, in::conv_out), &x = input_value(node, g, in::x);
    io_ = elem_of(node, conv_out, "conv_out");
    expect_dtype(node, x, conv_out.dtype, "the convolution's input");
    expect_dtype(node, input_value(node, g, in::dy), conv_out.dtype, "the gradient");
    expect_shape(node, input_value(node, g, in::dy), conv_out.shape, "the gradient");
    const ir::Value& dw = output_value(node, g, out::dw);
    dw_type_ = elem_of(node, dw, "dw");
    problem_ = conv_problem(node, x.shape, dw.shape, conv_out.shape, x.dtype);
    const std::string why = small_conv_refusal(problem_, device::SmallConvKernel::weight_backward);
    if (!why.empty())
      fail(node, "its one-pass kernel does not take " + problem_.describe() + ": " + why +
                     " (compile with --disable-pass fuse_cbr_weight_backward)");
    shape_ = small_conv_shape(problem_);
    // The verifier has checked the mask's shape for its kind (ops/bn_relu_backward_stages.h).
    mask_ = ops::BnReluBackwardStages::of(node, g).mask;
    if (mask_ == Mask::bits) mask_row_bytes_ = relu_mask_words(problem_.K) * 4;
    if (mask_ == Mask::relu_output) expect_dtype(node, input_value(node, g, in::mask), conv_out.dtype, "the relu output");
    const int64_t K = problem_.K;
    gamma_t_ = channel_type(node, input_value(node, g, in::gamma), K, "gamma");
    mean_t_ = channel_type(node, input_value(node, g, in::saved_mean), K, "saved_mean");
    invstd_t_ = channel_type(node, input_value(node, g, in::saved_invstd), K, "saved_invstd");
    dgamma_t_ = channel_type(node, output_value(node, g, out::dgamma), K, "dgamma");
    dbeta_t_ = channel_type(node, output_value(node, g, out::dbeta), K, "dbeta");
    ctx.reserve_workspace(0, device::cbr_weight_backward_scratch_bytes(shape_, ctx.sm_count()));
    over_ranks_ = BatchnormRankSum::make(node, true, ctx);
  }

  void run(const KernelArgs& a) override {
    device::CbrWeightBackwardArgs args;
    args.io = io_;
    args.x = a.in[in::x].data;
    args.dy = a.in[in::dy].data;
    args.conv_out = a.in[in::conv_out].data;
    if (mask_ == Mask::bits) {
      args.relu_bits = a.in[in::mask].data;
      args.relu_bits_row_bytes = mask_row_bytes_;
    } else if (mask_ == Mask::affine) {
      args.relu_affine = static_cast<const float*>(a.in[in::mask].data);
    } else {
      args.relu_output = a.in[in::mask].data;
    }
    args.gamma = {a.in[in::gamma].data, gamma_t_};
    args.saved_mean = {a.in[in::saved_mean].data, mean_t_};
    args.saved_invstd = {a.in[in::saved_invstd].data, invstd_t_};
    args.dw = a.out[out::dw].data;
    args.dw_type = dw_type_;
    args.dgamma = {a.out[out::dgamma].data, dgamma_t_};
    args.dbeta = {a.out[out::dbeta].data, dbeta_t_};
    args.scratch = ctx_.workspace(0);
    args.sm_count = ctx_.sm_count();
    device::launch_cbr_weight_backward(shape_, args, ctx_.stream(), over_ranks_ ? &over_ranks_->device_hook() : nullptr);
  }

  std::string implementation() const override {
    const std::string one_pass =
        "one pass over dy and conv_out: the batchnorm backward's sums and the weight gradient's on the tensor cores, "
        "dconv never written";
    return over_ranks_ ? one_pass + "; " + over_ranks_->describe() : one_pass;
  }

 private:
  using Mask = ops::BnReluBackwardStages::Mask;
  CudaContext& ctx_;
  device::ElemType io_ = device::ElemType::f16, dw_type_ = device::ElemType::f32;
  device::ElemType gamma_t_{}, mean_t_{}, invstd_t_{}, dgamma_t_{}, dbeta_t_{};
  ConvProblem problem_;
  device::SmallConvShape shape_;
  Mask mask_ = Mask::relu_output;
  int64_t mask_row_bytes_ = 0;
  std::unique_ptr<BatchnormRankSum> over_ranks_;  // sync-BN, or null
};

}  // namespace

void register_cbr_weight_backward_kernels() { add_kernel<CbrWeightBackward>("cbr_weight_backward"); }

}  // namespace trident::cuda
