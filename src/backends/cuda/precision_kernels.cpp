// The cuda backend's `cast` (mixed precision's weight and image copies and their gradients).
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

}  // namespace

void register_precision_kernels() { add_kernel<Cast>("cast"); }

}  // namespace trident::cuda
