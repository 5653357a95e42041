// The cuda backend's pad2d (an ONNX Pad that no convolution or pooling could take as its own
// padding, and the crop that is its backward) and channel_slice (ONNX Slice and Split on
// channels, concat's backward, and the placement of a slice's gradient back into the full
// channels): values moved as raw bits by device/pad_slice.cu. Checked once, at construction.
#include "backends/cuda/device/pad_slice.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/pad_fill.h"

namespace trident::cuda {

namespace {

class Pad2d final : public Kernel {
 public:
  Pad2d(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
    elem_of(node, x, "the input");
    expect_dtype(node, y, x.dtype, "the output");
    const std::vector<int64_t>& p = node.attrs.ints("pads");
    if (x.shape.size() != 4 || p.size() != 4)
      fail(node, "needs a 4-D NHWC input and four pads [top, left, bottom, right]");
    expect_shape(node, y, {x.shape[0], x.shape[1] + p[0] + p[2], x.shape[2] + p[1] + p[3], x.shape[3]}, "the output");
    x_ = x.shape;
    y_ = y.shape;
    top_ = p[0];
    left_ = p[1];
    element_bytes_ = dtype_size(x.dtype);
    fill_bits_ = ops::fill_bits(node.attrs.f("value", 0.0), x.dtype);
  }

  void run(const KernelArgs& a) override {
    device::launch_pad2d(a.in[0].data, a.out[0].data, x_[0], x_[1], x_[2], x_[3], y_[1], y_[2], top_, left_,
                         element_bytes_, fill_bits_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  Shape x_, y_;
  int64_t top_ = 0, left_ = 0;
  size_t element_bytes_ = 4;
  uint64_t fill_bits_ = 0;
};

class ChannelSlice final : public Kernel {
 public:
  ChannelSlice(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
    elem_of(node, x, "the input");
    expect_dtype(node, y, x.dtype, "the output");
    if (x.shape.empty() || x.shape.size() != y.shape.size())
      fail(node, "input and output must have the same rank (at least one axis)");
    from_ = x.shape.back();
    to_ = y.shape.back();
    start_ = node.attrs.i("start", 0);
    rows_ = to_ > 0 ? numel(y.shape) / to_ : 0;
    if (from_ <= 0 || to_ != node.attrs.i("channels", 0) || numel(x.shape) != rows_ * from_)
      fail(node, "input " + shape_str(x.shape) + " and output " + shape_str(y.shape) +
                     " differ in more than the last axis, or the output is not 'channels' wide");
    element_bytes_ = dtype_size(x.dtype);
  }

  void run(const KernelArgs& a) override {
    device::launch_channel_slice(a.in[0].data, a.out[0].data, rows_, from_, to_, start_, element_bytes_,
                                 ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t rows_ = 0, from_ = 0, to_ = 0, start_ = 0;
  size_t element_bytes_ = 4;
};

}  // namespace

void register_pad_slice_kernels() {
  add_kernel<Pad2d>("pad2d");
  add_kernel<ChannelSlice>("channel_slice");
}

}  // namespace trident::cuda
