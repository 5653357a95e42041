// What both halves of the quantize_int8 pass share: which convolutions int8 may take, and how
// a convolution becomes an int8 conv2d_epilogue. The calibrated half is quantize_int8.cpp, the
// half that reads an imported QDQ model's pairs quantize_int8_qdq.cpp.
#pragma once
#include <string>

#include "ir/graph.h"

namespace trident::passes::int8_detail {

// Fewer input channels than this: the image itself (the first layer stays f32).
inline constexpr int64_t kMinInputChannels = 5;

inline bool is_convolution(const ir::Node& n) { return n.op == "conv2d" || n.op == "conv2d_epilogue"; }

// Why the convolution stays f32 before any scale is looked at, or "".
inline std::string structural_refusal(const ir::Graph& g, const ir::Node& n) {
  const ir::Value& x = g.value(n.inputs[0]);
  if (x.dtype != DType::f32) return "its input is " + std::string(dtype_name(x.dtype)) + ", int8 quantizes f32";
  if (x.shape.size() == 4 && x.shape[3] < kMinInputChannels)
    return "its input has " + std::to_string(x.shape[3]) +
           " channels (the image itself): the first layer stays f32, where int8 costs the most accuracy and saves "
           "the least time";
  return {};
}

// `n` (conv2d or conv2d_epilogue) reads its input on the grid of `scale` (u8 or s8).
inline void quantize(ir::Node& n, double scale, bool is_unsigned) {
  if (n.op == "conv2d") {
    n.op = "conv2d_epilogue";
    n.attrs.set("has_bias", int64_t{n.inputs.size() == 3});
    n.attrs.set("residual", int64_t{0});
    n.attrs.set("relu", int64_t{0});
  }
  n.attrs.set("int8_input_scale", scale);
  n.attrs.set("int8_unsigned", int64_t{is_unsigned});
}

}  // namespace trident::passes::int8_detail
