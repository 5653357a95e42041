// Host launchers of the pooling kernels over NHWC tensors (device/pool.cu): max and average
// pooling with their backward passes written as gathers (each dx element sums the windows that
// cover it, in the reference's order: deterministic, no atomics); and global average pooling
// (device/global_avgpool.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// x [N,H,W,C] pooled by an R×S window into y [N,P,Q,C].
struct PoolGeometry {
  int64_t N = 0, H = 0, W = 0, C = 0, P = 0, Q = 0;
  int64_t R = 1, S = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // average pooling's divisor: the full window
};

// y and, where window_index is not null, the forward's window index (core/window_index.h:
// one byte per element of y) for maxpool2d_index_backward. With an affine ([2, C] f32, a
// defer_bn_apply prologue), the pooling is of relu(x·scale + shift), rounded as bn_apply rounds.
void launch_maxpool_forward(ElemType t, const PoolGeometry& g, const void* x, const float* affine, void* y,
                            void* window_index, cudaStream_t stream);
// dy goes to the first row-major maximum of its window, as in the reference backend. Windows
// that tile the input exactly (VGG's 2×2, stride 2) take one pass over x, dy and dx; others two:
// each window's index into `scratch` (one byte per window, two for windows of more than 255
// cells), then every dx element gathers the dy of the windows whose index names it.
void launch_maxpool_backward(ElemType t, const PoolGeometry& g, const void* x, const void* dy, void* dx,
                             void* scratch, cudaStream_t stream);
int64_t maxpool_backward_scratch_bytes(const PoolGeometry& g);
// The same gather from the forward's window index; x is not read.
void launch_maxpool_index_backward(ElemType t, const PoolGeometry& g, const void* window_index, const void* dy,
                                   void* dx, cudaStream_t stream);
void launch_avgpool_forward(ElemType t, const PoolGeometry& g, const void* x, void* y, cudaStream_t stream);
void launch_avgpool_backward(ElemType t, const PoolGeometry& g, const void* dy, void* dx, cudaStream_t stream);

// x [N, HW, C] → y [N, C], the mean over HW; backward spreads dy / HW.
void launch_global_avgpool_forward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* x, void* y,
                                   cudaStream_t stream);
void launch_global_avgpool_backward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* dy, void* dx,
                                    cudaStream_t stream);

}  // namespace trident::cuda::device
