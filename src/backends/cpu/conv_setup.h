// What a convolution primitive of one node depends on, shared by the convolution kernels
// (conv.cpp) and the choice between oneDNN's implementations for inference
// (conv_algorithms.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"

namespace trident::cpu {

struct ConvSetup {
  memory::desc src, weights, bias, dst;  // NHWC activations, weights in the graph's OHWI layout
  DnnlWindow geom;
  int64_t groups = 1, kernel_h = 0, kernel_w = 0;
  std::string sig;  // cache key of everything above
};

ConvSetup conv_setup(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y,
                     bool has_bias);

// A forward convolution descriptor: NHWC activations for the direct algorithm; Winograd's
// implementations choose their blocked activation layout (format `any`). Weights: format `any`.
// `position`: the implementation at that place in oneDNN's list (0: its first choice).
dnnl::convolution_forward::primitive_desc forward_pd(
    const ConvSetup& s, dnnl::prop_kind prop,
    const dnnl::primitive_attr& attr = user_scratchpad_attr(),
    dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct, int position = 0);

// Calls visit(pd, position) for oneDNN's implementations in its order until it returns false.
// The walk has to happen while the operation descriptor it started from lives (oneDNN's list
// keeps a pointer to it), which is why it is one function and not next_impl() on a returned pd.
void walk_forward_implementations(
    const ConvSetup& s, dnnl::prop_kind prop, const dnnl::primitive_attr& attr,
    dnnl::algorithm algorithm,
    const std::function<bool(const dnnl::convolution_forward::primitive_desc&, int)>& visit);

// The attributes of a forward conv with post-ops, applied in order: sum, then relu.
dnnl::primitive_attr post_ops_attr(const ConvPostOps& post);

}  // namespace trident::cpu
