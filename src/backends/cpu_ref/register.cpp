// Registers every reference CPU kernel under the backend name "cpu_ref": a kernel of its own
// for each op of docs/OPS.md that computes something, and the decomposition (decomposed.cpp)
// for each fused op, named here one by one so that no op falls back silently.
#include "backends/cpu_ref/kernels.h"
#include "backends/kernel.h"

namespace trident {

void register_cpu_ref_kernels() {
  struct Entry {
    const char* op;
    void (*fn)(const KernelArgs&);
  };
  static const Entry entries[] = {
      {"conv2d", cpu_ref::conv2d},
      {"conv2d_backward_data", cpu_ref::conv2d_backward_data},
      {"relu", cpu_ref::relu},
      {"relu_backward", cpu_ref::relu_backward},
      {"relu_mask", cpu_ref::relu_mask},
      {"relu_mask_backward", cpu_ref::relu_mask_backward},
      {"bn_apply", cpu_ref::bn_apply},
      {"add", cpu_ref::add},
      {"fill", cpu_ref::fill},
      {"flatten", cpu_ref::view_copy},
      {"reshape", cpu_ref::view_copy},
      {"maxpool2d_backward", cpu_ref::maxpool2d_backward},
      {"maxpool2d_index_backward", cpu_ref::maxpool2d_index_backward},
      {"avgpool2d", cpu_ref::avgpool2d},
      {"avgpool2d_backward", cpu_ref::avgpool2d_backward},
      {"global_avgpool", cpu_ref::global_avgpool},
      {"global_avgpool_backward", cpu_ref::global_avgpool_backward},
      {"layernorm", cpu_ref::layernorm},
      {"layernorm_backward", cpu_ref::layernorm_backward},
      {"linear", cpu_ref::linear},
      {"linear_backward_data", cpu_ref::linear_backward_data},
      {"linear_backward_weight", cpu_ref::linear_backward_weight},
      {"softmax_cross_entropy", cpu_ref::softmax_cross_entropy},
      {"softmax_cross_entropy_backward", cpu_ref::softmax_cross_entropy_backward},
      {"sgd_update", cpu_ref::sgd_update},
      {"adamw_update", cpu_ref::adamw_update},
      {"mul", cpu_ref::mul},
      {"mul_reduce", cpu_ref::mul_reduce},
      {"activation", cpu_ref::activation},
      {"activation_backward", cpu_ref::activation_backward},
      {"clip", cpu_ref::clip},
      {"concat", cpu_ref::concat},
      {"cast", cpu_ref::cast},
      {"cast_group", cpu_ref::cast_group},
      {"resize_channels", cpu_ref::resize_channels},
      {"channel_shuffle", cpu_ref::channel_shuffle},
      {"pad2d", cpu_ref::pad2d},
      {"channel_slice", cpu_ref::channel_slice},
      {"fold_batchnorm", cpu_ref::fold_batchnorm},
      {"quantize_dequantize", cpu_ref::quantize_dequantize},
      {"dropout_mask", cpu_ref::dropout_mask},
      {"rng_advance", cpu_ref::rng_advance},
  };
  for (const Entry& e : entries) KernelRegistry::add_fn("cpu_ref", e.op, e.fn);
  KernelRegistry::add("cpu_ref", "allreduce_mean", cpu_ref::make_allreduce_mean);
  KernelRegistry::add("cpu_ref", "allreduce_wait", cpu_ref::make_allreduce_wait);
  KernelRegistry::add("cpu_ref", "batchnorm2d", cpu_ref::make_batchnorm2d);
  KernelRegistry::add("cpu_ref", "batchnorm2d_backward", cpu_ref::make_batchnorm2d_backward);
  KernelRegistry::add("cpu_ref", "batchnorm_affine", cpu_ref::make_batchnorm_affine);
  for (const char* fused : {"cbr", "cbar", "conv_bn_stats", "bn_relu", "batchnorm_relu_backward", "cbr_weight_backward",
                            "elementwise", "conv2d_epilogue"})
    KernelRegistry::add("cpu_ref", fused, cpu_ref::make_decomposed);
  // The weight gradient and max pooling are plain ops unless their input comes through a
  // prologue (prologue = 1, defer_bn_apply).
  auto plain_unless_prologue = [](KernelFn plain) {
    return [plain](const ir::Node& n, const ir::Graph& g, BackendContext& ctx) -> std::unique_ptr<Kernel> {
      if (n.attrs.i("prologue", 0)) return cpu_ref::make_decomposed(n, g, ctx);
      return make_fn_kernel(plain);
    };
  };
  KernelRegistry::add("cpu_ref", "conv2d_backward_weight", plain_unless_prologue(cpu_ref::conv2d_backward_weight));
  KernelRegistry::add("cpu_ref", "maxpool2d", plain_unless_prologue(cpu_ref::maxpool2d));
}

}  // namespace trident
