// What the cpu backend (oneDNN) states to the compile pipeline (ops/backend_traits.h): no
// strategy forms, int8 convolutions, a convolution epilogue ending in most activations, and its batchnorm backward may write the source gradient before it has read
// the whole source, so dconv never takes conv_out's buffer. Pure data, built with or without
// oneDNN.
#include "backends/kernel.h"

namespace trident {

ops::BackendTraits cpu_traits() {
  ops::BackendTraits t;
  t.bn_backward_overwrites_conv_out = false;
  t.int8_convolution = true;
  // oneDNN's eltwise post-ops (activation.cpp): not hardsigmoid, which oneDNN 2.6 lacks.
  using ops::ActivationFn;
  t.epilogue_activations = {ActivationFn::sigmoid, ActivationFn::silu, ActivationFn::hardswish, ActivationFn::gelu,
                            ActivationFn::gelu_tanh};
  return t;
}

}  // namespace trident
