// 4-D layout conversion of host tensors at the user boundary: trident's activations are NHWC,
// while arrays from PyTorch and ONNX are NCHW. A plain copy through the permuted strides, so
// it serves any dtype; tensors of other ranks are returned unchanged.
#pragma once
#include "core/host_tensor.h"

namespace trident {

HostTensor nchw_to_nhwc(const HostTensor& t);
HostTensor nhwc_to_nchw(const HostTensor& t);

}  // namespace trident
