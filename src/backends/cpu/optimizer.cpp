// sgd_update and adamw_update on the "cpu" backend: one pass over the flat parameter, gradient
// and optimizer-state buffers, cpu_ref's loops (oneDNN has no optimizer primitive).
#include "backends/cpu/ref_kernels.h"

namespace trident::cpu {

void register_optimizer_kernels() {
  add_kernel<RefLoop<cpu_ref::sgd_update>>("sgd_update");
  add_kernel<RefLoop<cpu_ref::adamw_update>>("adamw_update");
}

}  // namespace trident::cpu
