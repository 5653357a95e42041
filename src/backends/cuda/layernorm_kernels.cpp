// layernorm and layernorm_backward (ops/layernorm.cpp) on the GPU: the activation in f32, f16
// or bf16, gamma, beta and the parameter gradients in one floating type (f32 under mixed
// precision: assign_precision keeps them so), over
// the warp-per-row kernels of device/layernorm.cu. Checked once, at construction.
#include "backends/cuda/device/layernorm.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/norm_params.h"

namespace trident::cuda {

namespace {

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    backward_ = node.op == "layernorm_backward";
    expect_arity(node, 3, 3, backward_ ? 3 : 1, backward_ ? 3 : 1);
    const ir::Value& x = input_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    if (x.shape.size() < 2) fail(node, "the input needs a batch axis and the normalised axis");
    channels_ = x.shape.back();
    rows_ = numel(x.shape) / channels_;
    const Shape c{channels_};
    const ir::Value& gamma = input_value(node, g, backward_ ? 2 : 1);
    param_ = elem_of(node, gamma, "gamma");
    expect_shape(node, gamma, c, "gamma");
    if (!backward_) {
      expect_dtype(node, input_value(node, g, 2), gamma.dtype, "beta");
      expect_shape(node, input_value(node, g, 2), c, "beta");
    }
    if (backward_) {
      expect_dtype(node, input_value(node, g, 1), x.dtype, "gradient");
      expect_shape(node, input_value(node, g, 1), x.shape, "gradient");
      for (size_t o = 1; o < 3; ++o) {
        expect_dtype(node, output_value(node, g, o), gamma.dtype, "parameter gradient");
        expect_shape(node, output_value(node, g, o), c, "parameter gradient");
      }
      ctx.reserve_workspace(0, device::layernorm_backward_workspace(rows_, channels_));
    }
    expect_dtype(node, output_value(node, g, 0), x.dtype, "output");
    expect_shape(node, output_value(node, g, 0), x.shape, "output");
    eps_ = static_cast<float>(ops::NormParams::of(node).eps);
  }

  void run(const KernelArgs& a) override {
    device::LayerNormArgs args;
    args.x = a.in[0].data;
    args.rows = rows_;
    args.channels = channels_;
    args.eps = eps_;
    args.param = param_;
    if (!backward_) {
      args.gamma = a.in[1].data;
      args.beta = a.in[2].data;
      args.y = a.out[0].data;
      device::launch_layernorm(type_, args, ctx_.stream());
      return;
    }
    args.dy = a.in[1].data;
    args.gamma = a.in[2].data;
    args.dx = a.out[0].data;
    args.dgamma = a.out[1].data;
    args.dbeta = a.out[2].data;
    device::launch_layernorm_backward(type_, args, ctx_.workspace(0), ctx_.stream());
  }

  std::string implementation() const override { return "warp-per-row layernorm kernels"; }

 private:
  CudaContext& ctx_;
  bool backward_ = false;
  device::ElemType type_ = device::ElemType::f32, param_ = device::ElemType::f32;
  int64_t rows_ = 0, channels_ = 0;
  float eps_ = 1e-5f;
};

}  // namespace

void register_layernorm_kernels() {
  add_kernel<LayerNormKernel>({"layernorm", "layernorm_backward"});
}

}  // namespace trident::cuda
