// Registers the "cuda" backend: its context (one per executable) and every kernel family.
#include "backends/cuda/kernels.h"

namespace trident {

void register_cuda_kernels() {
  KernelRegistry::add_context(cuda::kBackend, [](const BackendOptions& o) { return std::make_shared<cuda::CudaContext>(o); });
  cuda::register_elementwise_kernels();
  cuda::register_elementwise_fused_kernels();
  cuda::register_tensor_kernels();
  cuda::register_pool_kernels();
  cuda::register_linear_kernels();
  cuda::register_loss_kernels();
  cuda::register_optimizer_kernels();
  cuda::register_batchnorm_kernels();
  cuda::register_conv_kernels();
  cuda::register_fused_cbr_kernels();
  cuda::register_bn_apply_kernels();
  cuda::register_bn_relu_kernels();
  cuda::register_fused_inference_kernels();
  cuda::register_precision_kernels();
  cuda::register_pad_slice_kernels();
  cuda::register_collective_kernels();
  cuda::register_layernorm_kernels();
  cuda::register_cbr_weight_backward_kernels();
}

}  // namespace trident
