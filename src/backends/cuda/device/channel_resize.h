// Host launchers of the channel-moving kernels (device/channel_resize.cu): resize_channels
// copies rows of `from` channels into rows of `to` channels, zero-filling the channels that
// are new; channel_shuffle interleaves `groups` groups of each row's channels.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trident::cuda::device {

// x is [rows, from], y is [rows, to], both of `element_bytes` (2 or 4) per value.
void launch_resize_channels(const void* x, void* y, int64_t rows, int64_t from, int64_t to, size_t element_bytes,
                            cudaStream_t stream);
// y[r, j·groups + i] = x[r, i·(channels/groups) + j] over rows × channels.
void launch_channel_shuffle(const void* x, void* y, int64_t rows, int64_t channels, int64_t groups,
                            size_t element_bytes, cudaStream_t stream);

}  // namespace trident::cuda::device
