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
    const MovedValues v = moved_values(node, g);
    const std::vector<int64_t>& p = node.attrs.ints("pads");
    if (v.x.shape.size() != 4 || p.size() != 4)
      fail(node, "needs a 4-D NHWC input and four pads [top, left, bottom, right]");
    x_ = v.x.shape;
    y_ = {x_[0], x_[1] + p[0] + p[2], x_[2] + p[1] + p[3], x_[3]};
    expect_shape(node, v.y, y_, "the output");
    top_ = p[0];
    left_ = p[1];
    element_bytes_ = v.element_bytes;
    fill_bits_ = ops::fill_bits(node.attrs.f("value", 0.0), v.x.dtype);
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
    const MovedValues v = moved_values(node, g);
    rows_ = last_axis_rows(node, v);
    if (rows_.to != node.attrs.i("channels", 0))
      fail(node, "the output " + shape_str(v.y.shape) + " is not attribute 'channels' wide");
    start_ = node.attrs.i("start", 0);
    element_bytes_ = v.element_bytes;
  }

  void run(const KernelArgs& a) override {
    device::launch_channel_slice(a.in[0].data, a.out[0].data, rows_.rows, rows_.from, rows_.to, start_,
                                 element_bytes_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  LastAxisRows rows_;
  int64_t start_ = 0;
  size_t element_bytes_ = 4;
};

}  // namespace

void register_pad_slice_kernels() {
  add_kernel<Pad2d>("pad2d");
  add_kernel<ChannelSlice>("channel_slice");
}

}  // namespace trident::cuda
