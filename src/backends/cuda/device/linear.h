// Host launcher of the bias-gradient reduction of linear_backward_weight (device/linear.cu):
// db[o] = Σ_n dy[n, o], one thread per column adding its rows in order (f64), deterministic.
// The matrix products themselves run on cuBLASLt (linear_kernels.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

void launch_column_sums(ElemType t, const void* dy, int64_t rows, int64_t cols, void* sums, cudaStream_t stream);

}  // namespace trident::cuda::device
