// A non-owning view of a dense, row-major tensor: what a kernel receives.
// Memory belongs to the executable's arena and flat buffers; views never allocate.
#pragma once
#include "core/dtype.h"
#include "core/shape.h"

namespace trident {

struct TensorView {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;

  int64_t numel() const { return trident::numel(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

}  // namespace trident
