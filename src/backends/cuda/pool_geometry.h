// A pooling node's window over its x and y shapes, as the cuda pooling kernels take it
// (device::PoolGeometry): shared by the pooling kernels and the batchnorm backward that routes
// a max pooling's gradient itself (pooled_dy). Defined in pool_kernels.cpp.
#pragma once
#include "backends/cuda/device/pool.h"
#include "core/shape.h"
#include "ir/graph.h"

namespace trident::cuda {

// Geometry of pooling x [N,H,W,C] into y [N,P,Q,C] with the node's window attributes
// (ops/window.h); a window that does not fit fails with the node's name.
device::PoolGeometry pool_geometry(const ir::Node& node, const Shape& x, const Shape& y);

}  // namespace trident::cuda
