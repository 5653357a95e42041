// mul, clip, concat and resize_channels on the "cpu" backend: memory-bound loops where a oneDNN primitive
// would gain little, so they run the cpu_ref kernels behind this backend's f32-only check.
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::onednn {

namespace {

template <void (*Fn)(const KernelArgs&)>
class RefTensorLoop final : public Kernel {
 public:
  RefTensorLoop(const ir::Node& node, const ir::Graph& g) { expect_f32(node, g); }
  void run(const KernelArgs& args) override { Fn(args); }
};

}  // namespace

void register_tensor_kernels() {
  add_kernel<RefTensorLoop<cpu_ref::mul>>("mul");
  add_kernel<RefTensorLoop<cpu_ref::clip>>("clip");
  add_kernel<RefTensorLoop<cpu_ref::concat>>("concat");
  add_kernel<RefTensorLoop<cpu_ref::resize_channels>>("resize_channels");
}

}  // namespace trident::onednn
