// What the reference backend states to the compile pipeline (ops/backend_traits.h): it has a
// kernel for every fused and strategy form (most by their decomposition), so each can be checked
// against it, and it takes no strategy by default, so its graphs stay the plain ones.
#include "backends/kernel.h"

namespace trident {

ops::BackendTraits cpu_ref_traits() {
  ops::BackendTraits t;
  t.deferred_bn_apply = true;
  t.maxpool_window_index = true;
  t.cbr_weight_backward = true;
  t.low_precision_gradients = true;
  t.int8_convolution = true;
  using ops::ActivationFn;
  t.epilogue_activations = {ActivationFn::sigmoid, ActivationFn::silu,  ActivationFn::hardsigmoid,
                            ActivationFn::hardswish, ActivationFn::gelu, ActivationFn::gelu_tanh};
  t.bn_backward_overwrites_conv_out = true;
  return t;
}

}  // namespace trident
