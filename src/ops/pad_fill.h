// The bits of pad2d's attribute 'value' in an activation dtype, for the kernels that move raw
// values: cpu_ref and cuda write them into every cell outside the input.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

namespace trident::ops {

// `v` rounded to `t` (nearest even), in the low dtype_size(t) bytes.
inline uint64_t fill_bits(double v, DType t) {
  uint64_t bits = 0;
  switch (t) {
    case DType::f64: std::memcpy(&bits, &v, sizeof v); break;
    case DType::f32: {
      const float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      bits = b;
      break;
    }
    case DType::f16: bits = float_to_half(static_cast<float>(v)); break;
    case DType::bf16: bits = float_to_bf16(static_cast<float>(v)); break;
    default: throw Error("pad2d pads floating-point tensors, not " + std::string(dtype_name(t)));
  }
  return bits;
}

}  // namespace trident::ops
