// The cuda backend's element-wise family: relu, relu_backward, add, fill and the
// flatten/reshape views. Shapes and dtypes are checked once, at construction; run() only
// enqueues on the context's stream.
#include <cstring>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "core/half.h"

namespace trident::cuda {

namespace {

using device::ElemType;

// relu, relu_backward, add: same-shape operands, one launch over every element.
enum class SameShapeOp { relu, relu_backward, add };

template <SameShapeOp Op>
class SameShapeKernel final : public Kernel {
 public:
  SameShapeKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    const size_t arity = Op == SameShapeOp::relu ? 1 : 2;
    expect_arity(node, arity, arity, 1, 1);
    const ir::Value& x = input_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    for (size_t i = 1; i < arity; ++i) {
      expect_dtype(node, input_value(node, g, i), x.dtype, "input");
      expect_shape(node, input_value(node, g, i), x.shape, "input");
    }
    expect_dtype(node, output_value(node, g, 0), x.dtype, "output");
    expect_shape(node, output_value(node, g, 0), x.shape, "output");
  }

  void run(const KernelArgs& a) override {
    const int64_t n = a.out[0].numel();
    if constexpr (Op == SameShapeOp::relu)
      device::launch_relu(type_, a.in[0].data, a.out[0].data, n, ctx_.stream());
    else if constexpr (Op == SameShapeOp::relu_backward)
      device::launch_relu_backward(type_, a.in[0].data, a.in[1].data, a.out[0].data, n, ctx_.stream());
    else
      device::launch_add(type_, a.in[0].data, a.in[1].data, a.out[0].data, n, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
};

// fill: the value is encoded once, here, into the output dtype's bit pattern.
class FillKernel final : public Kernel {
 public:
  FillKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 0, 0, 1, 1);
    const ir::Value& y = output_value(node, g, 0);
    const double value = node.attrs.f("value");
    const float f = static_cast<float>(value);
    switch (y.dtype) {
      case DType::f32: std::memcpy(&bits_, &f, sizeof f); break;
      case DType::i32: {
        const int32_t i = static_cast<int32_t>(value);
        std::memcpy(&bits_, &i, sizeof i);
        break;
      }
      case DType::f16: bits_ = float_to_half(f), wide_ = false; break;
      case DType::bf16: bits_ = float_to_bf16(f), wide_ = false; break;
      default: fail(node, "cannot fill a " + std::string(dtype_name(y.dtype)) + " tensor (f32, f16, bf16 or i32)");
    }
  }

  void run(const KernelArgs& a) override {
    const int64_t n = a.out[0].numel();
    if (wide_) device::launch_fill32(a.out[0].data, bits_, n, ctx_.stream());
    else device::launch_fill16(a.out[0].data, static_cast<uint16_t>(bits_), n, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  uint32_t bits_ = 0;
  bool wide_ = true;  // 4-byte elements
};

// flatten / reshape: a view. The planner normally gives the output the input's memory;
// when it did not, the bytes are copied.
class ViewKernel final : public Kernel {
 public:
  ViewKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx), node_name_(node.name) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
    expect_dtype(node, y, x.dtype, "output");
    if (numel(x.shape) != numel(y.shape))
      fail(node, "output " + shape_str(y.shape) + " does not hold the element count of input " + shape_str(x.shape));
  }

  void run(const KernelArgs& a) override {
    if (a.out[0].data == a.in[0].data || a.in[0].bytes() == 0) return;
    check(cudaMemcpyAsync(a.out[0].data, a.in[0].data, a.in[0].bytes(), cudaMemcpyDeviceToDevice, ctx_.stream()),
          "the copy of view node '" + node_name_ + "'");
  }

 private:
  CudaContext& ctx_;
  std::string node_name_;
};

}  // namespace

void register_elementwise_kernels() {
  add_kernel<SameShapeKernel<SameShapeOp::relu>>("relu");
  add_kernel<SameShapeKernel<SameShapeOp::relu_backward>>("relu_backward");
  add_kernel<SameShapeKernel<SameShapeOp::add>>("add");
  add_kernel<FillKernel>("fill");
  add_kernel<ViewKernel>({"flatten", "reshape"});
}

}  // namespace trident::cuda
