// softmax_cross_entropy and its backward on the "cpu" backend: oneDNN has no fused primitive
// for them, and the loss is a sliver of a step, so they run cpu_ref's loops (labels are i32).
#include "backends/cpu/ref_kernels.h"

namespace trident::cpu {

void register_loss_kernels() {
  add_kernel<RefLoop<cpu_ref::softmax_cross_entropy, 1>>("softmax_cross_entropy");
  add_kernel<RefLoop<cpu_ref::softmax_cross_entropy_backward, 1>>("softmax_cross_entropy_backward");
}

}  // namespace trident::cpu
