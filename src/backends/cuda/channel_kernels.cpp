// The cuda backend's per-channel ops: resize_channels, the channel padding the pad_channels
// pass inserts in front of convolutions (and its backward, which drops the padded channels
// again), and bn_apply, [relu] x·scale + shift from an affine [2, C] (ops/bn_apply.cpp).
#include "backends/cuda/device/channel_resize.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

class ResizeChannels final : public Kernel {
 public:
  ResizeChannels(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
    elem_of(node, x, "the input");
    expect_dtype(node, y, x.dtype, "the output");
    if (x.shape.empty() || x.shape.size() != y.shape.size())
      fail(node, "input and output must have the same rank (at least one axis)");
    from_ = x.shape.back();
    to_ = y.shape.back();
    rows_ = to_ > 0 ? numel(y.shape) / to_ : 0;
    if (from_ <= 0 || numel(x.shape) != rows_ * from_)
      fail(node, "input " + shape_str(x.shape) + " and output " + shape_str(y.shape) +
                     " differ in more than the last axis");
    element_bytes_ = dtype_size(x.dtype);
  }
  void run(const KernelArgs& a) override {
    device::launch_resize_channels(a.in[0].data, a.out[0].data, rows_, from_, to_, element_bytes_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t rows_ = 0, from_ = 0, to_ = 0;
  size_t element_bytes_ = 0;
};

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

void register_channel_kernels() {
  add_kernel<ResizeChannels>("resize_channels");
  add_kernel<BnApply>("bn_apply");
}

}  // namespace trident::cuda
