// Layout conversion at the user boundary: trident's activations are NHWC and its weights OHWI
// and [out, in], while arrays and initializers from PyTorch and ONNX are NCHW, OIHW and
// [in, out]. Plain copies through the permuted strides, so they serve any dtype; host tensors
// of other ranks are returned unchanged.
#pragma once
#include <vector>

#include "core/host_tensor.h"

namespace trident {

HostTensor nchw_to_nhwc(const HostTensor& t);
HostTensor nhwc_to_nchw(const HostTensor& t);

// Convolution weights [K, C, R, S] → [K, R, S, C] (the NCHW → NHWC permutation).
std::vector<float> oihw_to_ohwi(const std::vector<float>& w, const Shape& oihw);
// Convolution weights of any dtype: trident's [K, R, S, C] ↔ PyTorch's and ONNX's [K, C, R, S].
HostTensor ohwi_to_oihw(const HostTensor& w);
HostTensor oihw_to_ohwi(const HostTensor& w);
// A classifier matrix [out, H·W·C] whose columns follow a flatten of an NHWC tensor ↔ the same
// matrix with columns in the NCHW flatten order c·H·W + h·W + w (PyTorch's, ONNX's).
HostTensor hwc_columns_to_chw(const HostTensor& w, int64_t C, int64_t H, int64_t W);
HostTensor chw_columns_to_hwc(const HostTensor& w, int64_t C, int64_t H, int64_t W);
// A row-major [rows, cols] matrix → its [cols, rows] transpose.
std::vector<float> transpose_2d(const std::vector<float>& m, int64_t rows, int64_t cols);

}  // namespace trident
