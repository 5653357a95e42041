// Registers the "cpu" backend (on oneDNN): its context and every kernel family, called once,
// lazily, by KernelRegistry. Each op family file registers its own ops (docs/OPS.md + fused cbr).
#include "backends/cpu/cpu_context.h"
#include "backends/cpu/kernels.h"

namespace trident {

void register_cpu_kernels() {
  KernelRegistry::add_context(cpu::kBackend, [](const BackendOptions&) { return std::make_shared<cpu::CpuContext>(); });
  cpu::register_conv_kernels();
  cpu::register_batchnorm_kernels();
  cpu::register_elementwise_kernels();
  cpu::register_activation_kernels();
  cpu::register_elementwise_fused_kernels();
  cpu::register_pool_kernels();
  cpu::register_linear_kernels();
  cpu::register_loss_kernels();
  cpu::register_optimizer_kernels();
  cpu::register_collective_kernels();
  cpu::register_tensor_kernels();
  cpu::register_fused_cbr_kernels();
  cpu::register_fused_inference_kernels();
  cpu::register_quantize_kernels();
}

}  // namespace trident
