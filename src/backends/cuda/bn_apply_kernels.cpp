// bn_apply on the GPU: [relu] x·scale + shift from an affine [2, C] (ops/bn_apply.cpp), a piece
// of the cross-layer fusion's decomposition (defer_bn_apply), run wherever a graph holds it as
// a node; one pass of the convolutions' per-channel epilogue kernel (device/conv_device.h).
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

class BnApply final : public Kernel {
 public:
  BnApply(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &affine = input_value(node, g, 1), &y = output_value(node, g, 0);
    args_.io = elem_of(node, x, "the input");
    expect_dtype(node, y, x.dtype, "the output");
    expect_shape(node, y, x.shape, "the output");
    if (x.shape.size() != 4) fail(node, "the input must be [N,H,W,C]");
    args_.channels = x.shape.back();
    args_.rows = numel(x.shape) / args_.channels;
    if (affine.dtype != DType::f32 || affine.shape != Shape{2, args_.channels})
      fail(node, "the affine must be f32 [2," + std::to_string(args_.channels) + "]");
    args_.shift_type = device::ElemType::f32;
    args_.relu = node.attrs.i("relu", 1) != 0;
  }
  void run(const KernelArgs& a) override {
    device::ChannelAffineArgs args = args_;
    args.x = a.in[0].data;
    args.scale = static_cast<const float*>(a.in[1].data);
    args.shift = args.scale + args.channels;
    args.y = a.out[0].data;
    device::launch_channel_affine(args, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  device::ChannelAffineArgs args_;
};

}  // namespace

void register_bn_apply_kernels() { add_kernel<BnApply>("bn_apply"); }

}  // namespace trident::cuda
