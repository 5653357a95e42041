// The 1-bit ReLU mask a fused training op keeps for its backward instead of its full-size
// output: bit c % 32 of 32-bit word c / 32 of row m is set when y[m, c] > 0. Each row takes
// whole words (an i32 tensor [N, H, W, ceil(C / 32)]) and the bits past C are 0. On the
// little-endian machines trident runs on, that is bit c % 8 of byte c / 8 of the row.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace trident {

inline int64_t relu_mask_words(int64_t channels) { return (channels + 31) / 32; }

// The mask's shape for an activation of shape `y` (channels last).
inline Shape relu_mask_shape(const Shape& y) {
  Shape s = y;
  if (!s.empty()) s.back() = relu_mask_words(s.back());
  return s;
}

}  // namespace trident
