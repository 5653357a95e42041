// Host launchers of pad2d and channel_slice on the GPU (device/pad_slice.cu): values moved as
// raw bits, in the widest unit (16, 8, 4 or 2 bytes) that the row geometry and the pointers'
// alignment allow, one thread per output unit so stores are coalesced.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trident::cuda::device {

// y [n, ho, wo, c] from x [n, h, w, c]: y[n, i, j] = x[n, i - top, j - left] where that is
// inside x, else the value whose low `element_bytes` (2, 4 or 8) bytes are `fill_bits`.
void launch_pad2d(const void* x, void* y, int64_t n, int64_t h, int64_t w, int64_t c, int64_t ho, int64_t wo,
                  int64_t top, int64_t left, size_t element_bytes, uint64_t fill_bits, cudaStream_t stream);
// y [rows, cy] from x [rows, cx]: y[r, k] = x[r, start + k] where 0 <= start + k < cx, else zero bits.
void launch_channel_slice(const void* x, void* y, int64_t rows, int64_t cx, int64_t cy, int64_t start,
                          size_t element_bytes, cudaStream_t stream);

}  // namespace trident::cuda::device
