// Asynchronous copies from global to shared memory (cp.async, sm_80 and later), so that a kernel
// can load its next tile while it computes on the current one: the small-channel convolutions
// (small_channel_conv.cu, cbr_weight_backward.cu) keep the loads of tile i + 1 in flight behind
// tile i's matrix products. A copy whose source lies outside the tensor writes zeros instead
// (its source size is 0), so padding and the rows past the last tile need no second path.
// Device code only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/mma.cuh"

namespace trident::cuda::device::async_copy {

// `bytes` (4, 8 or 16) from `src` to `dst` (shared, aligned to `bytes`), or as many zero bytes
// when !valid; `src` must still be a mapped address then (it is not read). 16-byte copies
// bypass L1 (data read once); smaller ones go through it.
template <int bytes>
__device__ __forceinline__ void copy(void* dst, const void* src, bool valid) {
  static_assert(bytes == 4 || bytes == 8 || bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(mma::shared_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(mma::shared_address(dst)), "l"(src),
                 "n"(bytes), "r"(valid ? bytes : 0));
}

// Closes the group of copies this thread issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `pending` of this thread's committed groups are still in flight. Other
// threads' copies become visible only after a barrier that follows their own waits.
template <int pending>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

}  // namespace trident::cuda::device::async_copy
