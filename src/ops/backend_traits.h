// What a backend states about itself to the compile pipeline: which fused and strategy forms it
// has kernels for beyond every op's decomposition, what limits those kernels, and which memory
// strategies it takes by default. Each backend declares its traits beside its kernels
// (backends/<name>/traits.cpp); the runtime hands them to the passes in CompileOptions, so no
// pass decides by a backend's name. A backend that declares nothing gets these defaults: the
// decompositions only, no strategy on by default.
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/activation_math.h"

namespace trident::ops {

struct BackendTraits {
  // Kernels for forms that only some backends run (the pass that makes them is refused,
  // with a sentence naming the backend, where they are missing).
  bool deferred_bn_apply = false;     // defer_bn_apply's convolution prologue and block-end apply
  bool maxpool_window_index = false;  // save_maxpool_index's pooling with a saved window index
  bool cbr_weight_backward = false;   // fuse_cbr_weight_backward's one-pass batchnorm + wgrad backward
  bool low_precision_gradients = false;  // the optimizer reads f16/bf16 gradients (fold_gradient_cast)
  bool int8_convolution = false;  // conv2d_epilogue in int8 (quantize_int8)
  // The activations a conv2d_epilogue may end with (fuse_conv_epilogue); empty: relu and clip only.
  std::vector<ActivationFn> epilogue_activations;

  // Limits of those kernels. The dtypes in which a convolution runs a deferred batchnorm apply
  // in its own prologue, and why not in others (empty: every dtype).
  std::vector<DType> fused_prologue_dtypes;
  std::string fused_prologue_limit;
  // cbr_weight_backward is one kernel with the limits of ops/cbr_weight_backward.h (dtype
  // included); off: the backend runs it by its decomposition, in any dtype and shape.
  bool cbr_weight_backward_one_pass = false;
  // The batchnorm-relu backward may write its dconv over its own conv_out input (it reads
  // each element before writing it); off: only over dy (oneDNN promises no such order).
  bool bn_backward_overwrites_conv_out = true;

  // Strategies on by default (a CompileOptions switch of -1 takes these).
  struct Defaults {
    bool pad_channels = false;             // pad_channels: channels filled to 16-byte vectors
    bool pack_relu_mask = false;           // pack_relu_mask: a 1-bit ReLU mask in place of y
    bool defer_bn_apply = false;           // defer_bn_apply
    bool save_maxpool_index = false;       // save_maxpool_index
    bool fuse_cbr_weight_backward = false;  // fuse_cbr_weight_backward
  } defaults;

  bool epilogue_takes(ActivationFn fn) const {
    for (ActivationFn f : epilogue_activations)
      if (f == fn) return true;
    return false;
  }
  // Whether a convolution runs the deferred apply in its prologue in `dtype`.
  bool fuses_prologue_in(DType dtype) const {
    if (fused_prologue_dtypes.empty()) return true;
    for (DType d : fused_prologue_dtypes)
      if (d == dtype) return true;
    return false;
  }
};

}  // namespace trident::ops
