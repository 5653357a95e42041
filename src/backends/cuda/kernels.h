// Internal header of the "cuda" backend: how its kernels are registered and the entry points
// of each kernel family (one file per family, <family>_kernels.cpp, listed in register.cpp).
#pragma once
#include <initializer_list>
#include <memory>
#include <string>

#include "backends/cuda/cuda_context.h"
#include "backends/kernel.h"
#include "core/error.h"
#include "ir/graph.h"

namespace trident::cuda {

inline constexpr const char* kBackend = "cuda";

// An Error naming the node and op, for anything a kernel cannot do or that failed.
[[noreturn]] inline void fail(const ir::Node& node, const std::string& what) {
  throw Error("cuda kernel for node '" + node.name + "' (" + node.op + "): " + what);
}

// Registers kernel class K, constructed as K(node, graph, CudaContext&). Errors thrown while
// building (a cuDNN graph it cannot support, say) are re-thrown naming the node.
template <class K>
void add_kernel(const char* op) {
  KernelRegistry::add(kBackend, op, [](const ir::Node& node, const ir::Graph& g, BackendContext& ctx) {
    try {
      return std::unique_ptr<Kernel>(std::make_unique<K>(node, g, cuda_context(ctx)));
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("cuda kernel for node", 0) == 0) throw;
      fail(node, what);
    }
  });
}
// One kernel class for every op it runs (a forward and its variants, say).
template <class K>
void add_kernel(std::initializer_list<const char*> ops) {
  for (const char* op : ops) add_kernel<K>(op);
}

// Kernel families (each defined in its own file; register.cpp calls them all).
void register_elementwise_kernels();        // relu, relu_backward, add, fill, flatten/reshape views
void register_elementwise_fused_kernels();  // elementwise (the fused programs)
void register_tensor_kernels();             // mul, clip, concat, resize_channels (channel padding)
void register_pool_kernels();               // max/avg/global pooling, forward and backward
void register_linear_kernels();             // linear forward/backward on cuBLASLt
void register_loss_kernels();               // softmax cross-entropy, forward and backward
void register_optimizer_kernels();          // sgd_update, adamw_update over the flat buffers
void register_batchnorm_kernels();          // batchnorm2d, its backward, batchnorm_relu_backward
void register_conv_kernels();               // conv2d, dgrad, wgrad, conv2d_epilogue (cuDNN graphs)
void register_fused_cbr_kernels();          // cbr, cbar, conv_bn_stats (conv+genstats, finalize, apply)
void register_bn_apply_kernels();           // bn_apply (the deferred batchnorm apply)
void register_bn_relu_kernels();            // bn_relu (channel sums, finalize, apply)
void register_fused_inference_kernels();    // fold_batchnorm
void register_precision_kernels();          // cast, cast_group (mixed precision)
void register_pad_slice_kernels();          // pad2d, channel_slice (ONNX Pad, Slice and Split)
void register_collective_kernels();         // allreduce_mean, allreduce_wait (NCCL)
void register_layernorm_kernels();          // layernorm and its backward
void register_cbr_weight_backward_kernels();  // cbr_weight_backward (a first layer's one-pass backward)

}  // namespace trident::cuda
