// Tensors outside an executable: a shape, a dtype and row-major bytes on the host, and named
// maps of them, the common currency of safetensors files, checkpoints, .npy arrays and ONNX
// initializers. Kept below the front ends and the runtime, so a reader needs neither.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace trident {

struct HostTensor {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<std::byte> data;  // row-major, numel(shape) * dtype_size(dtype) bytes
};

using WeightMap = std::map<std::string, HostTensor>;

// A copy of `t` as f32 (from f32, f64 or i32); throws for other dtypes, naming `what`.
HostTensor to_f32(const HostTensor& t, const std::string& what);

}  // namespace trident
