// Registers the "cpu" backend (on oneDNN): its context and every kernel family, called once,
// lazily, by KernelRegistry. Each op family file registers its own ops (docs/OPS.md + fused cbr).
#include "backends/cpu/cpu_context.h"
#include "backends/cpu/kernels.h"

namespace trident {

void register_cpu_kernels() {
  KernelRegistry::add_context(onednn::kBackend, [] { return std::make_shared<onednn::CpuContext>(); });
  onednn::register_conv_kernels();
  onednn::register_batchnorm_kernels();
  onednn::register_elementwise_kernels();
  onednn::register_elementwise_fused_kernels();
  onednn::register_pool_kernels();
  onednn::register_linear_kernels();
  onednn::register_loss_kernels();
  onednn::register_optimizer_kernels();
  onednn::register_tensor_kernels();
  onednn::register_fused_kernels();
  onednn::register_fused_inference_kernels();
}

}  // namespace trident
