// Dropout on the GPU: the mask by ops/dropout_math.h, the same function the reference backend
// calls, so both draw the same mask bit for bit; the state is read on the device, never baked
// into the launch, so a step replayed from a CUDA graph draws that step's mask.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/dropout.h"

namespace trident::cuda::device {

namespace {

template <class T>
__global__ void dropout_mask_kernel(const int32_t* rng, T* mask, int64_t n, uint32_t salt, uint32_t threshold, float scale,
                                    uint64_t group) {
  const uint64_t stream = ops::dropout_stream(static_cast<uint32_t>(rng[0]), static_cast<uint32_t>(rng[1]), salt);
  const T kept = from_float<T>(scale), dropped = from_float<T>(0.f);
  for (int64_t i = grid_start(); i < n; i += grid_stride())
    mask[i] = ops::dropout_keeps(stream, static_cast<uint64_t>(i) / group, threshold) ? kept : dropped;
}

__global__ void rng_advance_kernel(const int32_t* in, int32_t* out) {
  const int32_t key = in[0];
  const uint32_t counter = static_cast<uint32_t>(in[1]);
  out[0] = key;
  out[1] = static_cast<int32_t>(counter + 1u);
}

}  // namespace

void launch_dropout_mask(ElemType t, const ops::DropoutParams& p, const int32_t* rng, void* mask, int64_t n,
                         cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_mask_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(rng, static_cast<T*>(mask), n, p.salt, p.threshold,
                                                                 static_cast<float>(p.scale), p.group);
  });
  check_launch("dropout_mask_kernel");
}

void launch_rng_advance(const int32_t* in, int32_t* out, cudaStream_t stream) {
  rng_advance_kernel<<<1, 1, 0, stream>>>(in, out);
  check_launch("rng_advance_kernel");
}

}  // namespace trident::cuda::device
