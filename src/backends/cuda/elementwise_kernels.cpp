// The cuda backend's element-wise family: relu, relu_backward, add, mul, clip, fill, the
// flatten/reshape views, concat, and the fused `elementwise` op (one launch per node, every
// program interpreted per element). Shapes and dtypes are checked once, at construction;
// run() only enqueues on the context's stream.
#include <cstring>
#include <limits>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "core/half.h"
#include "ops/elementwise_program.h"

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
    if (b.shape != a.shape) {
      expect_shape(node, b, Shape{a.shape.back()}, "operand");
      channels_ = a.shape.back();
    }
  }

  void run(const KernelArgs& a) override {
    device::launch_mul(type_, a.in[0].data, a.in[1].data, a.out[0].data, a.out[0].numel(), channels_, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  int64_t channels_ = 0;  // 0: same shape
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

// The fused `elementwise` op: the programs are compiled once into a step table; each run
// fills in the tensor pointers and launches one kernel for every output.
class ElementwiseProgramKernel final : public Kernel {
 public:
  ElementwiseProgramKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    using P = device::ElementwiseProgram;
    if (node.inputs.empty()) fail(node, "needs at least one input");
    if (node.inputs.size() > static_cast<size_t>(P::kMaxInputs))
      fail(node, "reads " + std::to_string(node.inputs.size()) + " tensors; the cuda kernel takes at most " +
                     std::to_string(P::kMaxInputs) + " (split the chain with --disable-pass fuse_elementwise)");
    const ir::Value& x = input_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      expect_dtype(node, input_value(node, g, i), x.dtype, "operand");
      expect_shape(node, input_value(node, g, i), x.shape, "operand");
    }
    const auto programs = ops::parse_elementwise_programs(node.attrs.s("programs"));
    if (programs.size() != node.outputs.size())
      fail(node, "has " + std::to_string(programs.size()) + " programs for " + std::to_string(node.outputs.size()) +
                     " outputs");
    if (programs.size() > static_cast<size_t>(P::kMaxOutputs))
      fail(node, "has " + std::to_string(programs.size()) + " outputs; the cuda kernel takes at most " +
                     std::to_string(P::kMaxOutputs));
    int step = 0;
    for (size_t o = 0; o < programs.size(); ++o) {
      expect_dtype(node, output_value(node, g, o), x.dtype, "output");
      expect_shape(node, output_value(node, g, o), x.shape, "output");
      program_.first_step[o] = static_cast<int8_t>(step);
      for (const std::string& s : programs[o]) {
        if (step == P::kMaxSteps)
          fail(node, "has more than " + std::to_string(P::kMaxSteps) + " steps in all, more than the cuda kernel takes");
        int8_t code = P::kRelu;
        if (s != "relu") {
          if (s.rfind("add:", 0) != 0) fail(node, "has an unknown step '" + s + "' (relu, add:K)");
          const int k = std::stoi(s.substr(4));
          if (k < 1 || k >= static_cast<int>(node.inputs.size())) fail(node, "step '" + s + "' names no input");
          code = static_cast<int8_t>(k);
        }
        program_.steps[step++] = code;
      }
    }
    program_.first_step[programs.size()] = static_cast<int8_t>(step);
    program_.num_outputs = static_cast<int>(programs.size());
  }

  void run(const KernelArgs& a) override {
    for (size_t i = 0; i < a.in.size(); ++i) program_.inputs[i] = a.in[i].data;
    for (size_t o = 0; o < a.out.size(); ++o) program_.outputs[o] = a.out[o].data;
    device::launch_elementwise_program(type_, program_, a.in[0].numel(), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  device::ElementwiseProgram program_;
};

}  // namespace

void register_elementwise_kernels() {
  add_kernel<SameShapeKernel<SameShapeOp::relu>>("relu");
  add_kernel<SameShapeKernel<SameShapeOp::relu_backward>>("relu_backward");
  add_kernel<SameShapeKernel<SameShapeOp::add>>("add");
  add_kernel<MulKernel>("mul");
  add_kernel<ClipKernel>("clip");
  add_kernel<FillKernel>("fill");
  add_kernel<ViewKernel>("flatten");
  add_kernel<ViewKernel>("reshape");
  add_kernel<ConcatKernel>("concat");
  add_kernel<ElementwiseProgramKernel>("elementwise");
}

}  // namespace trident::cuda
