// mul, mul_reduce, dropout's mask and random state, clip, concat, resize_channels, channel_shuffle, pad2d and
// channel_slice on the "cpu" backend: memory-bound loops where a oneDNN primitive would gain
// little, so they run the cpu_ref kernels behind this backend's f32-only check.
#include "backends/cpu/ref_kernels.h"

namespace trident::cpu {

namespace {

// Dropout's random state (i32, so outside RefLoop's f32 check): one counter incremented.
class RngAdvance final : public Kernel {
 public:
  RngAdvance(const ir::Node&, const ir::Graph&) {}
  void run(const KernelArgs& args) override { cpu_ref::rng_advance(args); }
};

}  // namespace

void register_tensor_kernels() {
  add_kernel<RefLoop<cpu_ref::mul>>("mul");
  add_kernel<RefLoop<cpu_ref::mul_reduce>>("mul_reduce");
  add_kernel<RefLoop<cpu_ref::dropout_mask, 0>>("dropout_mask");
  add_kernel<RngAdvance>("rng_advance");
  add_kernel<RefLoop<cpu_ref::layernorm>>("layernorm");
  add_kernel<RefLoop<cpu_ref::layernorm_backward>>("layernorm_backward");
  add_kernel<RefLoop<cpu_ref::clip>>("clip");
  add_kernel<RefLoop<cpu_ref::concat>>("concat");
  add_kernel<RefLoop<cpu_ref::resize_channels>>("resize_channels");
  add_kernel<RefLoop<cpu_ref::channel_shuffle>>("channel_shuffle");
  add_kernel<RefLoop<cpu_ref::pad2d>>("pad2d");
  add_kernel<RefLoop<cpu_ref::channel_slice>>("channel_slice");
}

}  // namespace trident::cpu
