// The cpu backend's int8 convolution (int8_conv.cpp), built by conv2d_epilogue's kernel factory
// (fused_inference.cpp) for a node whose stages say int8.
#pragma once
#include <memory>

#include "backends/cpu/kernels.h"

namespace trident::cpu {

std::unique_ptr<Kernel> make_int8_conv_epilogue(const ir::Node& node, const ir::Graph& g, const CpuContext& ctx);

}  // namespace trident::cpu
