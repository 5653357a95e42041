// The ops oneDNN has no primitive for, or that need none: softmax cross-entropy and its
// backward, sgd_update, fill, and the fused elementwise and fold_batchnorm ops reuse the
// reference kernels of cpu_ref (f32 enforced here, at build time); flatten and reshape are
// views that copy only when the planner did not alias.
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::onednn {

namespace {

using LoopFn = void (*)(const KernelArgs&);

// A cpu_ref loop behind this backend's f32-only check; `non_float_inputs` are i32 labels.
template <LoopFn Fn, size_t... NonFloatInputs>
class RefLoop final : public Kernel {
 public:
  RefLoop(const ir::Node& node, const ir::Graph& g) { expect_f32(node, g, {NonFloatInputs...}); }
  void run(const KernelArgs& args) override { Fn(args); }
};

// A cpu_ref kernel object (one with state, or one cpu_ref registers privately) behind the same
// check. fold_batchnorm runs once per weight update (hoisted); elementwise is one fused loop.
class RefKernel final : public Kernel {
 public:
  RefKernel(const ir::Node& node, const ir::Graph& g) {
    expect_f32(node, g);
    ref_ = KernelRegistry::make("cpu_ref", node, g);
  }
  void run(const KernelArgs& args) override { ref_->run(args); }

 private:
  std::unique_ptr<Kernel> ref_;
};

class View final : public Kernel {
 public:
  View(const ir::Node& node, const ir::Graph& g) {
    expect_f32(node, g);
    if (node.inputs.size() != 1 || node.outputs.size() != 1 ||
        trident::numel(in_shape(node, g, 0)) != trident::numel(out_shape(node, g, 0)))
      fail(node, "a view needs one input and one output of the same element count");
  }
  void run(const KernelArgs& args) override {
    const TensorView &x = args.in[0], &y = args.out[0];
    if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
  }
};

}  // namespace

void register_misc_kernels() {
  add_kernel<RefLoop<cpu_ref::softmax_cross_entropy, 1>>("softmax_cross_entropy");
  add_kernel<RefLoop<cpu_ref::softmax_cross_entropy_backward, 1>>("softmax_cross_entropy_backward");
  add_kernel<RefLoop<cpu_ref::sgd_update>>("sgd_update");
  add_kernel<RefLoop<cpu_ref::fill>>("fill");
  add_kernel<RefKernel>("elementwise");
  add_kernel<RefKernel>("fold_batchnorm");
  add_kernel<View>("flatten");
  add_kernel<View>("reshape");
}

}  // namespace trident::onednn
