// The cuda backend's `cast` (mixed precision's weight and image copies and their gradients)
// and `cast_group` (all the weights' copies, or their gradients, in one launch).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/cast.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

class Cast final : public Kernel {
 public:
  Cast(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    auto from = device::elem_type(g.value(node.inputs[0]).dtype), to = device::elem_type(g.value(node.outputs[0]).dtype);
    if (!from || !to)
      fail(node, "casts between f32, f16 and bf16 only, not " + std::string(dtype_name(g.value(node.inputs[0]).dtype)) +
                     " to " + std::string(dtype_name(g.value(node.outputs[0]).dtype)));
    from_ = *from;
    to_ = *to;
  }
  void run(const KernelArgs& a) override {
    if (from_ == to_) {
      if (a.out[0].data != a.in[0].data)
        check(cudaMemcpyAsync(a.out[0].data, a.in[0].data, a.in[0].bytes(), cudaMemcpyDeviceToDevice, ctx_.stream()),
              "a same-dtype cast");
      return;
    }
    device::launch_cast(from_, a.in[0].data, to_, a.out[0].data, a.in[0].numel(), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  device::ElemType from_{}, to_{};
};

// cast_group: every pair in one launch (chunks of kCastGroupSpans); one dtype pair per node.
class CastGroup final : public Kernel {
 public:
  CastGroup(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    if (node.inputs.empty() || node.inputs.size() != node.outputs.size())
      fail(node, "needs as many outputs as inputs, at least one");
    const DType from = g.value(node.inputs[0]).dtype, to = g.value(node.outputs[0]).dtype;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (g.value(node.inputs[i]).dtype != from || g.value(node.outputs[i]).dtype != to)
        fail(node, "casts one dtype pair; input " + std::to_string(i) + " is " +
                       std::string(dtype_name(g.value(node.inputs[i]).dtype)));
    auto f = device::elem_type(from), t = device::elem_type(to);
    if (!f || !t || from == to)
      fail(node, "casts between different dtypes of f32, f16 and bf16 only, not " + std::string(dtype_name(from)) +
                     " to " + std::string(dtype_name(to)));
    from_ = *f;
    to_ = *t;
  }
  void run(const KernelArgs& a) override {
    device::CastSpans spans;
    for (size_t i = 0; i < a.in.size(); ++i) {
      spans.span[spans.count++] = {a.in[i].data, a.out[i].data, a.in[i].numel()};
      spans.longest = std::max(spans.longest, a.in[i].numel());
      if (spans.count == device::kCastGroupSpans || i + 1 == a.in.size()) {
        device::launch_cast_group(from_, to_, spans, ctx_.stream());
        spans = {};
      }
    }
  }

 private:
  CudaContext& ctx_;
  device::ElemType from_{}, to_{};
};

}  // namespace

void register_precision_kernels() {
  add_kernel<Cast>("cast");
  add_kernel<CastGroup>("cast_group");
}

}  // namespace trident::cuda
