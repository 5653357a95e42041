// The kernel of pixel_normalise.h: each thread reads one pixel (three bytes) and writes its three
// floats, so a channel is known from the pixel's position without a division per value.
#include "backends/cuda/images/pixel_normalise.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"

namespace trident::cuda {
namespace {

struct Affine {
  float scale[3], shift[3];
};

__global__ void pixel_normalise_kernel(const uint8_t* pixels, int64_t pixel_count, Affine a, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pixel_count; p += stride) {
    const uint8_t* s = pixels + 3 * p;
    float* d = out + 3 * p;
    for (int c = 0; c < 3; ++c) d[c] = static_cast<float>(s[c]) * a.scale[c] + a.shift[c];
  }
}

}  // namespace

void launch_pixel_normalise(const uint8_t* pixels, int64_t count, const float scale[3], const float shift[3], float* out,
                            cudaStream_t stream) {
  const int64_t pixel_count = count / 3;
  if (pixel_count == 0) return;
  Affine a;
  for (int c = 0; c < 3; ++c) a.scale[c] = scale[c], a.shift[c] = shift[c];
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((pixel_count + kThreads - 1) / kThreads, 4096);
  pixel_normalise_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(pixels, pixel_count, a, out);
  check_launch("the pixel normalisation kernel");
}

}  // namespace trident::cuda
