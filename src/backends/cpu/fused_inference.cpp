// fold_batchnorm on the "cpu" backend: cpu_ref's kernel, which runs once per weight update
// (the executable hoists it), so its speed does not matter. conv2d_epilogue, the other
// inference fusion, is a oneDNN convolution with post-ops (fused.cpp).
#include "backends/cpu/ref_kernels.h"

namespace trident::onednn {

void register_fused_inference_kernels() { add_kernel<RefKernel>("fold_batchnorm"); }

}  // namespace trident::onednn
