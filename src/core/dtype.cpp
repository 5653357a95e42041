// Sizes and names of element types.
#include "core/dtype.h"

#include "core/error.h"

namespace trident {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32})
    if (dtype_name(t) == name) return t;
  throw Error("unknown dtype '" + std::string(name) + "' (known: f32, f64, f16, bf16, i32)");
}

bool is_floating(DType t) { return t != DType::i32; }

}  // namespace trident
