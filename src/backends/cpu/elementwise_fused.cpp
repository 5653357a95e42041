// The fused `elementwise` op on the "cpu" backend: cpu_ref's interpreter of the node's
// programs, one loop over the elements for the whole chain (oneDNN's post-op chains cannot
// express every program the fuse_elementwise pass builds).
#include "backends/cpu/ref_kernels.h"

namespace trident::onednn {

void register_elementwise_fused_kernels() { add_kernel<RefKernel>("elementwise"); }

}  // namespace trident::onednn
