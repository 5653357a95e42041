// What the cuda backend states to the compile pipeline (ops/backend_traits.h): the fused and
// strategy forms its kernels run and the memory strategies it takes by default. Pure data, built
// with or without CUDA, so the passes' tests can compile a graph for this backend anywhere.
#include "backends/kernel.h"

namespace trident {

ops::BackendTraits cuda_traits() {
  ops::BackendTraits t;
  t.deferred_bn_apply = true;      // cuDNN's prologue fusion and the block-end apply
  t.maxpool_window_index = true;   // device/maxpool_index.cu
  t.cbr_weight_backward = true;    // device/cbr_weight_backward.cu
  t.low_precision_gradients = true;  // the optimizer kernels read f16/bf16 gradients
  t.fused_prologue_dtypes = {DType::f16};
  t.fused_prologue_limit = "cuDNN's fused prologue takes f16 only";
  t.cbr_weight_backward_one_pass = true;
  t.bn_backward_overwrites_conv_out = true;
  // The batchnorm backward is bandwidth-bound and device memory is the batch's limit: every
  // strategy that trades a recomputation or a narrower saved tensor for bytes is on.
  t.defaults.pad_channels = true;
  t.defaults.pack_relu_mask = true;
  t.defaults.defer_bn_apply = true;
  t.defaults.save_maxpool_index = true;
  t.defaults.fuse_cbr_weight_backward = true;
  return t;
}

}  // namespace trident
