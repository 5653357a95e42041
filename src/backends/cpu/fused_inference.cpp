// The inference fusions on the "cpu" backend: conv2d_epilogue, one oneDNN convolution with
// post-ops (bias, residual sum, relu or another activation; in int8 int8_conv.cpp's), and fold_batchnorm, cpu_ref's kernel, which runs once per
// weight update (the executable hoists it), so its speed does not matter.
#include <cstring>

#include "backends/cpu/int8_conv.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "backends/cpu/ref_kernels.h"
#include "ops/conv_stages.h"

namespace trident::cpu {

namespace {

// conv2d_epilogue: inputs x, w, [b (has_bias)], [residual (residual)]; output y. The residual
// is copied into y before the convolution, whose `sum` post-op then accumulates onto it.
class ConvEpilogue final : public PrimitiveKernel {
 public:
  ConvEpilogue(const ir::Node& node, const ir::Graph& g, const CpuContext& ctx)
      : PrimitiveKernel(node, g), residual_(ops::ConvStages::of(node).residual != ops::ConvStages::Residual::none) {
    expect_f32(node, g);
    const ops::ConvStages stages = ops::ConvStages::of(node);
    const bool has_bias = stages.bias;
    if (node.inputs.size() != 2 + size_t{has_bias} + size_t{residual_} || node.outputs.size() != 1)
      fail(node, "the inputs disagree with the has_bias/residual attributes");
    ConvOperands conv{in(0), in(1), std::nullopt, out(0)};
    if (has_bias) conv.bias = in(2);
    append_conv_forward(*this, node, in_shape(node, g, 0), in_shape(node, g, 1),
                        out_shape(node, g, 0), conv,
                        conv_post_ops(node, stages), ConvAlgorithms::from(ctx));
  }

  void run(const KernelArgs& args) override {
    check_views(args);
    if (residual_) {
      const TensorView &r = args.in.back(), &y = args.out[0];
      if (r.data != y.data) std::memcpy(y.data, r.data, y.bytes());  // unless the plan aliased them
    }
    execute(args);
  }

 private:
  bool residual_;
};

}  // namespace

void register_fused_inference_kernels() {
  add_factory("conv2d_epilogue", [](const ir::Node& node, const ir::Graph& g, const CpuContext& ctx) {
    if (ops::ConvStages::of(node).int8) return make_int8_conv_epilogue(node, g, ctx);
    return std::unique_ptr<Kernel>(std::make_unique<ConvEpilogue>(node, g, ctx));
  });
  add_kernel<RefLoop<cpu_ref::fold_batchnorm>>("fold_batchnorm");
}

}  // namespace trident::cpu
