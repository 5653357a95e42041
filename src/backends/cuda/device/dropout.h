// Host launchers of device/dropout.cu: dropout's training mask, each element decided by
// ops/dropout_math.h from the random state read on the device (so a recorded CUDA graph draws
// a new mask every replay), and the state's step counter. Each enqueues on `stream` and checks
// the launch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"
#include "ops/dropout_math.h"

namespace trident::cuda::device {

// mask[i] = p.scale where draw i / p.group keeps, else 0; `rng` is the i32[2] state on the device.
void launch_dropout_mask(ElemType t, const ops::DropoutParams& p, const int32_t* rng, void* mask, int64_t n,
                         cudaStream_t stream);
// out = in with the counter word plus one (out may be in).
void launch_rng_advance(const int32_t* in, int32_t* out, cudaStream_t stream);

}  // namespace trident::cuda::device
