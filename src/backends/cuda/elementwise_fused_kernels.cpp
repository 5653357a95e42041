// The cuda backend's fused `elementwise` op: the node's programs are checked and compiled once
// into a step table; each run fills in the tensor pointers and launches one kernel that
// interprets every output's program per element.
#include <memory>
#include <string>

#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/elementwise_program.h"

namespace trident::cuda {

namespace {

using device::ElemType;

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

void register_elementwise_fused_kernels() { add_kernel<ElementwiseProgramKernel>("elementwise"); }

}  // namespace trident::cuda
