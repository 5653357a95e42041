// fold_batchnorm on the GPU, the inference fusion's weight side: w [K, ...] and the batchnorm
// parameters → folded weights and bias (device/batchnorm_fold.cu), run once per weight update
// since the executable hoists it. conv2d_epilogue, the other inference fusion, shares the
// forward convolution of conv_kernels.cpp.
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/norm_params.h"

namespace trident::cuda {

namespace {

using device::ElemType;

class FoldBatchNorm final : public Kernel {
 public:
  FoldBatchNorm(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 5, 6, 2, 2);
    const ir::Value& w = input_value(node, g, 0);
    w_t_ = elem_of(node, w, "weight");
    if (w.shape.empty()) fail(node, "the weight needs an output-channel axis");
    K_ = w.shape[0];
    per_k_ = K_ > 0 ? numel(w.shape) / K_ : 0;
    expect_dtype(node, output_value(node, g, 0), w.dtype, "folded weight");
    expect_shape(node, output_value(node, g, 0), w.shape, "folded weight");
    const char* names[] = {"weight", "gamma", "beta", "running_mean", "running_var", "bias"};
    for (size_t i = 1; i < node.inputs.size(); ++i) types_[i - 1] = channel_type(node, input_value(node, g, i), K_, names[i]);
    has_bias_ = node.inputs.size() == 6;
    b_out_t_ = channel_type(node, output_value(node, g, 1), K_, "folded bias");
    eps_ = ops::NormParams::of(node).eps;
  }

  void run(const KernelArgs& a) override {
    device::FoldBatchNormArgs args;
    args.w = a.in[0].data;
    args.w_folded = a.out[0].data;
    args.w_type = w_t_;
    args.K = K_;
    args.per_k = per_k_;
    args.gamma = {a.in[1].data, types_[0]};
    args.beta = {a.in[2].data, types_[1]};
    args.mean = {a.in[3].data, types_[2]};
    args.var = {a.in[4].data, types_[3]};
    if (has_bias_) args.bias = {a.in[5].data, types_[4]};
    args.b_folded = {a.out[1].data, b_out_t_};
    args.eps = eps_;
    device::launch_fold_batchnorm(args, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType w_t_ = ElemType::f32, b_out_t_ = ElemType::f32;
  ElemType types_[5] = {};
  bool has_bias_ = false;
  int64_t K_ = 0, per_k_ = 0;
  double eps_ = 1e-5;
};

}  // namespace

void register_fused_inference_kernels() { add_kernel<FoldBatchNorm>("fold_batchnorm"); }

}  // namespace trident::cuda
