// Registers every kernel of the oneDNN backend under the name "cpu" (called once, lazily, by
// KernelRegistry). Each op family file registers its own ops (docs/OPS.md + fused cbr).
#include "backends/cpu/cpu_context.h"
#include "backends/cpu/kernels.h"

namespace trident {

void register_onednn_kernels() {
  KernelRegistry::add_context(onednn::kBackend, [] { return std::make_shared<onednn::CpuContext>(); });
  onednn::register_conv_kernels();
  onednn::register_batchnorm_kernels();
  onednn::register_eltwise_kernels();
  onednn::register_pool_kernels();
  onednn::register_linear_kernels();
  onednn::register_misc_kernels();
  onednn::register_tensor_kernels();
  onednn::register_fused_kernels();
}

}  // namespace trident
