// The device's half of sending a batch as uint8 pixels (InputLane::send_pixels): the loader's
// workers crop, resize and flip on the CPU and round to bytes, the bus carries a quarter of the
// floats' bytes, and this kernel turns each byte x into x · scale + shift of its channel.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace trident::cuda {

// out[i] = pixels[i] · scale[i % 3] + shift[i % 3] for i < count (NHWC rows of RGB).
void launch_pixel_normalise(const uint8_t* pixels, int64_t count, const float scale[3], const float shift[3], float* out,
                            cudaStream_t stream);

}  // namespace trident::cuda
