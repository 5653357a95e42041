// The fused training ops cbr / cbar (conv → batchnorm → [add residual] → relu), built from the
// same step builders as the single ops: one kernel, one list of primitive steps; the relu runs
// inside the batchnorm pass (cbr) or inside the residual add (cbar). Their backward,
// batchnorm_relu_backward, is batchnorm.cpp's; conv2d_epilogue, the inference fusion, is in
// fused_inference.cpp.
#include <optional>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "ops/cbr_operands.h"
#include "ops/conv_stages.h"

namespace trident::cpu {

namespace {

// cbr / cbar: operands as ops/cbr_operands.h lays them out (no relu mask, no affines).
class FusedForward final : public PrimitiveKernel {
 public:
  FusedForward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const ops::ConvStages stages = ops::ConvStages::of(node);
    if (stages.input_affine || stages.residual == ops::ConvStages::Residual::with_affine)
      fail(node, "a raw convolution output read through a batchnorm affine (defer_bn_apply) runs on cuda and cpu_ref only");
    const bool cbar = stages.residual != ops::ConvStages::Residual::none;
    const size_t base = cbar ? 7 : 6;
    if ((node.inputs.size() != base && node.inputs.size() != base + 1) || node.outputs.size() != 6)
      fail(node, "expected " + std::to_string(base) + " or " + std::to_string(base + 1) +
                     " inputs and 6 outputs");
    namespace i = ops::cbr_in;
    namespace o = ops::cbr_out;
    const ops::CbrOperands operands = ops::CbrOperands::of(node);
    ConvOperands conv{in(i::x), in(i::w), std::nullopt, out(o::conv_out)};
    const bool cancelled = stages.bias_cancelled;
    if (operands.bias >= 0 && !cancelled) conv.bias = in(operands.bias);
    const Shape& y = out_shape(node, g, 0);
    append_conv_forward(*this, node, in_shape(node, g, 0), in_shape(node, g, 1), y, conv);
    BnTrainingOperands bn{out(o::conv_out), in(i::gamma), in(i::beta), in(i::running_mean),
                          in(i::running_var), out(o::y), out(o::saved_mean), out(o::saved_invstd),
                          out(o::running_mean), out(o::running_var), std::nullopt};
    if (cancelled) bn.cancelled_bias = in(operands.bias);
    // cbr: the relu runs inside the batchnorm pass; cbar: inside the residual add's pass; a
    // clipped relu (relu_max, ReLU6) as a step of its own over y.
    const float relu_max = static_cast<float>(stages.relu_max);
    bn_.emplace(*this, node, y, bn, /*fuse_relu=*/!cbar && relu_max == 0);
    if (cbar) append_add(*this, trident::numel(y), out(o::y), in(operands.residual), out(o::y), /*relu_after=*/true);
    if (relu_max > 0) append_relu(*this, trident::numel(y), out(o::y), out(o::y), relu_max);
  }

  void run(const KernelArgs& args) override {
    execute(args);
    bn_->finish(args);
  }

 private:
  std::optional<BnTraining> bn_;
};

}  // namespace

void register_fused_cbr_kernels() {
  add_kernel<FusedForward>({"cbr", "cbar"});
}

}  // namespace trident::cpu
