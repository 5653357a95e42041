// Weights outside an executable: named host tensors, the common currency of safetensors
// files, checkpoints and ONNX initializers. Executables import and export them by name.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace trident::runtime {

struct HostTensor {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<std::byte> data;  // row-major, numel(shape) * dtype_size(dtype) bytes
};

using WeightMap = std::map<std::string, HostTensor>;

}  // namespace trident::runtime
