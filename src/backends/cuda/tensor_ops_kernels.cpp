// The cuda backend's tensor ops: mul (same shape, [C] broadcast over the last axis, or
// [N,1,1,C] per sample) and its operand gradient mul_reduce, the activations, dropout's mask and
// random state, clip,
// concat along the last axis (one strided 2-D copy per input), and resize_channels, the
// channel padding the pad_channels pass inserts in front of convolutions (and its backward,
// which drops the padded channels again). Checked once, at construction.
#include <limits>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/activation.h"
#include "backends/cuda/device/channel_resize.h"
#include "backends/cuda/device/dropout.h"
#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/activation.h"
#include "ops/dropout.h"
#include "ops/mul_broadcast.h"

namespace trident::cuda {

namespace {

using device::ElemType;

// mul: b has a's shape, or is [C] broadcast over a's last axis.
class MulKernel final : public Kernel {
 public:
  MulKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 1);
    const ir::Value &a = input_value(node, g, 0), &b = input_value(node, g, 1);
    type_ = elem_of(node, a, "input");
    expect_dtype(node, b, a.dtype, "operand");
    expect_dtype(node, output_value(node, g, 0), a.dtype, "output");
    expect_shape(node, output_value(node, g, 0), a.shape, "output");
    if (a.shape.empty()) fail(node, "cannot multiply a scalar tensor; give it at least one axis");
    kind_ = ops::mul_broadcast(a.shape, b.shape);
    if (kind_ == ops::MulBroadcast::none)
      fail(node, "operand " + shape_str(b.shape) + " does not broadcast over " + shape_str(a.shape));
    if (kind_ != ops::MulBroadcast::same) channels_ = a.shape.back();
    if (kind_ == ops::MulBroadcast::sample_channel) rows_per_sample_ = a.shape[1] * a.shape[2];
  }

  void run(const KernelArgs& a) override {
    if (kind_ == ops::MulBroadcast::sample_channel)
      device::launch_mul_per_sample(type_, a.in[0].data, a.in[1].data, a.out[0].data, a.out[0].numel() / channels_,
                                    channels_, rows_per_sample_, ctx_.stream());
    else
      device::launch_mul(type_, a.in[0].data, a.in[1].data, a.out[0].data, a.out[0].numel(), channels_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  ops::MulBroadcast kind_ = ops::MulBroadcast::same;
  int64_t channels_ = 0;  // 0: same shape
  int64_t rows_per_sample_ = 0;
};

// mul_reduce: b's gradient, Σ a·dy over the rows mul broadcast b along.
class MulReduceKernel final : public Kernel {
 public:
  MulReduceKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 3, 3, 1, 1);
    const ir::Value &a = input_value(node, g, 0), &dy = input_value(node, g, 1), &b = input_value(node, g, 2);
    type_ = elem_of(node, a, "input");
    expect_dtype(node, dy, a.dtype, "gradient");
    expect_shape(node, dy, a.shape, "gradient");
    expect_dtype(node, output_value(node, g, 0), a.dtype, "output");
    expect_shape(node, output_value(node, g, 0), b.shape, "output");
    const ops::MulBroadcast kind = ops::mul_broadcast(a.shape, b.shape);
    if (kind != ops::MulBroadcast::channel && kind != ops::MulBroadcast::sample_channel)
      fail(node, "operand " + shape_str(b.shape) + " is not broadcast over " + shape_str(a.shape));
    channels_ = a.shape.back();
    rows_ = numel(a.shape) / channels_;
    groups_ = kind == ops::MulBroadcast::channel ? 1 : a.shape[0];
  }

  void run(const KernelArgs& a) override {
    device::launch_mul_reduce(type_, a.in[0].data, a.in[1].data, a.out[0].data, rows_, channels_, groups_,
                              ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  int64_t channels_ = 0, rows_ = 0, groups_ = 1;
};

// activation (input x) and activation_backward (x, dy): ops/activation_math.h per element.
class ActivationKernel final : public Kernel {
 public:
  ActivationKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    backward_ = node.op == "activation_backward";
    const size_t inputs = backward_ ? 2 : 1;
    expect_arity(node, inputs, inputs, 1, 1);
    const ir::Value& x = input_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    if (backward_) {
      expect_dtype(node, input_value(node, g, 1), x.dtype, "gradient");
      expect_shape(node, input_value(node, g, 1), x.shape, "gradient");
    }
    expect_dtype(node, output_value(node, g, 0), x.dtype, "output");
    expect_shape(node, output_value(node, g, 0), x.shape, "output");
    params_ = ops::activation_params(node.attrs);
  }

  void run(const KernelArgs& a) override {
    if (backward_)
      device::launch_activation_backward(type_, params_, a.in[0].data, a.in[1].data, a.out[0].data, a.out[0].numel(),
                                         ctx_.stream());
    else
      device::launch_activation(type_, params_, a.in[0].data, a.out[0].data, a.out[0].numel(), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  bool backward_ = false;
  ops::ActivationParams params_;
};

class ClipKernel final : public Kernel {
 public:
  ClipKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value& x = input_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    expect_dtype(node, output_value(node, g, 0), x.dtype, "output");
    if (numel(output_value(node, g, 0).shape) != numel(x.shape)) fail(node, "output and input sizes differ");
    lo_ = static_cast<float>(node.attrs.f("min", -std::numeric_limits<double>::infinity()));
    hi_ = static_cast<float>(node.attrs.f("max", std::numeric_limits<double>::infinity()));
  }

  void run(const KernelArgs& a) override {
    device::launch_clip(type_, a.in[0].data, a.out[0].data, a.out[0].numel(), lo_, hi_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  float lo_ = 0, hi_ = 0;
};

// concat along the last axis: one strided 2-D copy per input (rows × its channel bytes).
class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx), node_name_(node.name) {
    if (node.inputs.empty()) fail(node, "needs at least one input");
    expect_arity(node, 1, node.inputs.size(), 1, 1);
    const ir::Value& y = output_value(node, g, 0);
    if (y.shape.empty()) fail(node, "cannot concatenate into a scalar");
    elem_bytes_ = dtype_size(y.dtype);
    out_channels_ = y.shape.back();
    rows_ = out_channels_ > 0 ? numel(y.shape) / out_channels_ : 0;
    int64_t offset = 0;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::Value& x = input_value(node, g, i);
      expect_dtype(node, x, y.dtype, "input");
      if (x.shape.size() != y.shape.size() || numel(x.shape) != rows_ * x.shape.back())
        fail(node, "input " + shape_str(x.shape) + " does not fit output " + shape_str(y.shape));
      channels_.push_back(x.shape.back());
      offset += x.shape.back();
    }
    if (offset != out_channels_) fail(node, "the inputs' channels do not add up to the output's");
  }

  void run(const KernelArgs& a) override {
    auto* dst = static_cast<std::byte*>(a.out[0].data);
    const size_t pitch = static_cast<size_t>(out_channels_) * elem_bytes_;
    size_t offset = 0;
    for (size_t i = 0; i < channels_.size(); ++i) {
      const size_t width = static_cast<size_t>(channels_[i]) * elem_bytes_;
      if (width > 0 && rows_ > 0)
        check(cudaMemcpy2DAsync(dst + offset, pitch, a.in[i].data, width, width, static_cast<size_t>(rows_),
                                cudaMemcpyDeviceToDevice, ctx_.stream()),
              "the copy of input " + std::to_string(i) + " of concat node '" + node_name_ + "'");
      offset += width;
    }
  }

 private:
  CudaContext& ctx_;
  std::string node_name_;
  size_t elem_bytes_ = 4;
  int64_t out_channels_ = 0, rows_ = 0;
  std::vector<int64_t> channels_;
};

// channel_shuffle: ShuffleNet's interleaving of the channel groups, values moved as raw bits.
class ChannelShuffle final : public Kernel {
 public:
  ChannelShuffle(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    const MovedValues v = moved_values(node, g);
    expect_shape(node, v.y, v.x.shape, "the output");
    channels_ = v.x.shape.empty() ? 0 : v.x.shape.back();
    groups_ = node.attrs.i("groups", 0);
    if (groups_ < 1 || channels_ % groups_ != 0) fail(node, "attribute 'groups' must divide the channels");
    rows_ = channels_ > 0 ? numel(v.x.shape) / channels_ : 0;
    element_bytes_ = v.element_bytes;
  }

  void run(const KernelArgs& a) override {
    device::launch_channel_shuffle(a.in[0].data, a.out[0].data, rows_, channels_, groups_, element_bytes_,
                                   ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t channels_ = 0, groups_ = 1, rows_ = 0;
  size_t element_bytes_ = 4;
};

class ResizeChannels final : public Kernel {
 public:
  ResizeChannels(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    const MovedValues v = moved_values(node, g);
    rows_ = last_axis_rows(node, v);
    element_bytes_ = v.element_bytes;
  }
  void run(const KernelArgs& a) override {
    device::launch_resize_channels(a.in[0].data, a.out[0].data, rows_.rows, rows_.from, rows_.to, element_bytes_,
                                   ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  LastAxisRows rows_;
  size_t element_bytes_ = 0;
};

// dropout_mask: the mask from the i32[2] random state on the device (ops/dropout.h).
class DropoutMaskKernel final : public Kernel {
 public:
  DropoutMaskKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    expect_dtype(node, input_value(node, g, 0), DType::i32, "random state");
    type_ = elem_of(node, output_value(node, g, 0), "mask");
    params_ = ops::dropout_params(node.attrs);
  }
  void run(const KernelArgs& a) override {
    device::launch_dropout_mask(type_, params_, a.in[0].as<int32_t>(), a.out[0].data, a.out[0].numel(), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  ops::DropoutParams params_;
};

// rng_advance: the random state's counter plus one, in place, after the step's masks.
class RngAdvanceKernel final : public Kernel {
 public:
  RngAdvanceKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_dtype(node, input_value(node, g, 0), DType::i32, "random state");
  }
  void run(const KernelArgs& a) override {
    device::launch_rng_advance(a.in[0].as<int32_t>(), a.out[0].as<int32_t>(), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
};

}  // namespace

void register_tensor_kernels() {
  add_kernel<MulKernel>("mul");
  add_kernel<MulReduceKernel>("mul_reduce");
  add_kernel<ActivationKernel>({"activation", "activation_backward"});
  add_kernel<DropoutMaskKernel>("dropout_mask");
  add_kernel<RngAdvanceKernel>("rng_advance");
  add_kernel<ClipKernel>("clip");
  add_kernel<ConcatKernel>("concat");
  add_kernel<ResizeChannels>("resize_channels");
  add_kernel<ChannelShuffle>("channel_shuffle");
}

}  // namespace trident::cuda
