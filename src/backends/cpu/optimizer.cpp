// sgd_update on the "cpu" backend: one pass over the flat parameter, gradient and momentum
// buffers, cpu_ref's loop (oneDNN has no optimizer primitive).
#include "backends/cpu/ref_kernels.h"

namespace trident::cpu {

void register_optimizer_kernels() { add_kernel<RefLoop<cpu_ref::sgd_update>>("sgd_update"); }

}  // namespace trident::cpu
