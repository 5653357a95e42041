// The form of cbr_weight_backward (ops/cbr_weight_backward.cpp) that a one-pass kernel computes:
// the GPU's (backends/cuda/device/cbr_weight_backward.cu) holds the whole reduction R·S·C of
// the layer's window and its 64 output channels on chip. fuse_cbr_weight_backward fuses only
// this form, and the kernel checks the same function, so the two cannot disagree.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace trident::ops {

struct CbrWeightBackwardForm {
  int64_t C = 0, K = 0, R = 0, S = 0;  // input channels, output channels, window
  int64_t groups = 1, dilation_h = 1, dilation_w = 1;
  DType dtype = DType::f16;  // the activations'
};

inline constexpr int64_t kCbrWeightBackwardChannels = 64;  // K
inline constexpr int64_t kCbrWeightBackwardMostTaps = 64;  // R·S·C
inline constexpr int64_t kCbrWeightBackwardChannelStep = 4;  // C is read in fours

// Empty when the one-pass kernel takes the form, else why not, in words.
inline std::string cbr_weight_backward_refusal(const CbrWeightBackwardForm& f) {
  if (f.dtype != DType::f16 && f.dtype != DType::bf16)
    return "its one-pass kernel computes on the tensor cores in f16 or bf16, not " + std::string(dtype_name(f.dtype));
  if (f.groups != 1) return "the convolution is grouped";
  if (f.dilation_h != 1 || f.dilation_w != 1) return "the convolution is dilated";
  if (f.K != kCbrWeightBackwardChannels)
    return "the layer has " + std::to_string(f.K) + " output channels; its one-pass kernel takes 64";
  if (f.C % kCbrWeightBackwardChannelStep != 0)
    return "the input has " + std::to_string(f.C) + " channels; its one-pass kernel reads them in fours";
  if (f.R * f.S * f.C > kCbrWeightBackwardMostTaps)
    return "the window holds R·S·C = " + std::to_string(f.R * f.S * f.C) + " values; its one-pass kernel holds at most " +
           std::to_string(kCbrWeightBackwardMostTaps);
  return "";
}

}  // namespace trident::ops
