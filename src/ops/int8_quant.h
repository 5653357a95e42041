// The arithmetic of trident's int8 inference, in one place so that the reference (cpu_ref's
// quantize_dequantize inside the decomposition of an int8 conv2d_epilogue) and the integer
// kernels (oneDNN's u8/s8 convolution) round the same way: symmetric scales, no zero point,
// values rounded to nearest even after a multiplication by the inverse scale, then saturated.
// (An imported QDQ model may name a zero point; trident's integer kernels read only grids that
// need none.)
//   activations: per tensor, calibrated (runtime/int8_calibration.h); u8 [0, 255] where the
//                calibration saw no negative value (a relu's output), else s8 [-128, 127] (what
//                oneDNN's reorder saturates to; the scale maps the threshold to 127);
//   weights:     per output channel, from the channel's own largest magnitude, s8 [-127, 127].
#pragma once
#include <cmath>
#include <cstdint>

namespace trident::ops {

struct Int8Grid {
  float lo = -127, hi = 127;
};
// An activation's grid. A zero point z (an imported model's QuantizeLinear; trident's own
// calibration uses none) shifts it: round(x/s) + z saturates to the type's range, then z is
// taken off again, which is the same as saturating round(x/s) to [lo − z, hi − z].
inline Int8Grid int8_grid(bool is_unsigned, int zero_point = 0) {
  const Int8Grid g = is_unsigned ? Int8Grid{0, 255} : Int8Grid{-128, 127};
  return {g.lo - static_cast<float>(zero_point), g.hi - static_cast<float>(zero_point)};
}
// The weights' grid (symmetric: a channel's largest magnitude is ±127).
inline constexpr Int8Grid kWeightGrid{-127, 127};

// The scale that maps [-threshold, threshold] (or [0, threshold] unsigned) onto the grid.
inline float int8_scale(double threshold, bool is_unsigned) {
  const double levels = is_unsigned ? 255.0 : 127.0;
  return threshold > 0 && std::isfinite(threshold) ? static_cast<float>(threshold / levels) : 1.0f;
}

// The integer a value becomes: x·(1/scale), rounded to nearest even, saturated to the grid.
inline float int8_level(float x, float inverse_scale, Int8Grid grid) {
  const float q = std::nearbyint(x * inverse_scale);
  return q < grid.lo ? grid.lo : q > grid.hi ? grid.hi : q;
}

}  // namespace trident::ops
