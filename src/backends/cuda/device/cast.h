// Host launcher of the dtype conversion kernel (device/cast.cu): f32, f16 and bf16 in any
// direction, rounding to nearest even, as core/half.h does on the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

void launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t stream);

}  // namespace trident::cuda::device
