// Host launchers of the dtype conversion kernels (device/cast.cu): f32, f16 and bf16 in any
// direction, rounding to nearest even, as core/half.h does on the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

void launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t stream);

// Many casts of one dtype pair in one launch (cast_group): span k converts n elements of x to y.
// The spans travel as a kernel parameter, kCastGroupSpans at a time.
struct CastSpan {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t n = 0;
};
inline constexpr int kCastGroupSpans = 64;
struct CastSpans {
  CastSpan span[kCastGroupSpans];
  int count = 0;
  int64_t longest = 0;
};
void launch_cast_group(ElemType from, ElemType to, const CastSpans& spans, cudaStream_t stream);

}  // namespace trident::cuda::device
