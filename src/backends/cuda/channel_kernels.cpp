// The cuda backend's resize_channels: the channel padding the pad_channels pass inserts in
// front of convolutions (and its backward, which drops the padded channels again).
#include "backends/cuda/device/channel_resize.h"
#include "backends/cuda/device/checks.h"
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

}  // namespace

void register_channel_kernels() { add_kernel<ResizeChannels>("resize_channels"); }

}  // namespace trident::cuda
