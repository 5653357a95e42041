// NumPy .npy files (format versions 1, 2 and 3; little-endian f32, f64 and i32; C order) for
// `trident infer` inputs and outputs, so users can bring arrays from PyTorch and take results back.
// Layout: image tensors in .npy files are NCHW like PyTorch and ONNX; convert at the boundary
// (core/tensor_layout.h).
#pragma once
#include <cstddef>
#include <string>

#include "runtime/weights.h"

namespace trident::runtime {

// Reads a whole .npy file. The header is parsed strictly (keys descr, fortran_order, shape and
// nothing else), the data size must equal the file's remaining bytes, and fortran_order True,
// big-endian or other dtypes are refused. Every Error names the file.
HostTensor read_npy(const std::string& path);
// Same, from bytes in memory; `label` names the source in errors.
HostTensor parse_npy(const void* data, size_t size, const std::string& label);

// The bytes of a .npy file (version 1.0, or 2.0 when the header needs it) holding `t`
// (f32, f64 or i32) in C order.
std::string npy_bytes(const HostTensor& t);
// Writes `t` through a temporary file and a rename: a failure never leaves a partial file.
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace trident::runtime
