// Which convolution backward pairs the cuda backend runs on two streams at once: with
// BackendOptions::side_stream, a dgrad immediately followed in the order by the wgrad of the
// same dy runs on the side stream beside that wgrad. The kernels (conv_kernels.cpp) and the
// memory plan (CudaContext::concurrent_steps, which keeps the pair's tensors apart) ask here.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace trident::cuda {

// Whether the node at position `dgrad_pos` of g's order is a dgrad whose next node is the
// wgrad of the same dy.
inline bool dgrad_then_wgrad(const ir::Graph& g, int dgrad_pos) {
  const std::vector<int>& order = g.order();
  if (dgrad_pos < 0 || dgrad_pos + 1 >= static_cast<int>(order.size())) return false;
  const ir::Node& d = g.node(order[dgrad_pos]);
  const ir::Node& w = g.node(order[dgrad_pos + 1]);
  return d.op == "conv2d_backward_data" && w.op == "conv2d_backward_weight" && w.inputs.size() > 1 &&
         d.inputs[0] == w.inputs[1];
}

}  // namespace trident::cuda
