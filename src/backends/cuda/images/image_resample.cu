// The kernel of image_resample.h: one thread per output pixel, its taps worked out in place.
#include "backends/cuda/images/image_resample.h"

#include "backends/cuda/cuda_check.h"

namespace trident::cuda {
namespace {

// The source pixels output `o` of an axis reads, [lo, lo + n), as image_transform.cpp's
// axis_taps finds them, and the sum of their unnormalised weights.
struct Taps {
  double centre, widen, sum;
  int lo, n;
};

__device__ Taps taps_of(int in_size, int out_size, int o) {
  const double scale = static_cast<double>(in_size) / out_size;
  Taps t;
  t.widen = scale > 1.0 ? scale : 1.0;
  t.centre = (o + 0.5) * scale;
  const int max_taps = static_cast<int>(ceil(t.widen)) * 2 + 1;
  t.lo = max(static_cast<int>(floor(t.centre - t.widen + 0.5)), 0);
  const int hi = min(static_cast<int>(floor(t.centre + t.widen + 0.5)), in_size);
  t.n = min(max(hi - t.lo, 0), max_taps);
  t.sum = 0;
  for (int k = 0; k < t.n; ++k) t.sum += fmax(0.0, 1.0 - fabs((t.lo + k + 0.5 - t.centre) / t.widen));
  return t;
}

__device__ float weight_of(const Taps& t, int k) {
  return static_cast<float>(fmax(0.0, 1.0 - fabs((t.lo + k + 0.5 - t.centre) / t.widen)) / t.sum);
}

struct Affine {
  float scale[3], shift[3];
};

// Output pixels whose horizontal taps number at most this keep their weights in registers;
// a stronger shrink (a box over ~11x the output's side) works them out again per row.
constexpr int kMaxKeptTaps = 24;

__global__ void resample_kernel(const ResampleRow* rows, int size, Affine a, float* out) {
  const ResampleRow r = rows[blockIdx.y];
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= size * size) return;
  const int oy = p / size, ox = p % size;
  const Taps ty = taps_of(r.box_height, r.resize_height, r.window_top + oy);
  const Taps tx = taps_of(r.box_width, r.resize_width, r.window_left + ox);
  float wx[kMaxKeptTaps];
  const bool kept = tx.n <= kMaxKeptTaps;
  if (kept)
    for (int kx = 0; kx < tx.n; ++kx) wx[kx] = weight_of(tx, kx);
  float v[3] = {0, 0, 0};
  for (int ky = 0; ky < ty.n; ++ky) {
    const uint8_t* src = r.pixels + (r.box_top + ty.lo + ky) * r.pitch + (r.box_left + tx.lo) * 3;
    float h[3] = {0, 0, 0};
    for (int kx = 0; kx < tx.n; ++kx) {
      const float w = kept ? wx[kx] : weight_of(tx, kx);
      for (int c = 0; c < 3; ++c) h[c] += w * static_cast<float>(src[3 * kx + c]);
    }
    const float w = weight_of(ty, ky);
    for (int c = 0; c < 3; ++c) v[c] += w * h[c];
  }
  float* dst = out + ((static_cast<int64_t>(r.out_row) * size + oy) * size + (r.flip ? size - 1 - ox : ox)) * 3;
  for (int c = 0; c < 3; ++c) dst[c] = v[c] * a.scale[c] + a.shift[c];
}

}  // namespace

void launch_image_resample(const ResampleRow* rows, int count, int size, const float scale[3], const float shift[3],
                           float* out, cudaStream_t stream) {
  if (count == 0) return;
  Affine a;
  for (int c = 0; c < 3; ++c) a.scale[c] = scale[c], a.shift[c] = shift[c];
  constexpr int kThreads = 256;
  const dim3 grid((size * size + kThreads - 1) / kThreads, count);
  resample_kernel<<<grid, kThreads, 0, stream>>>(rows, size, a, out);
  check_launch("the image resampling kernel");
}

}  // namespace trident::cuda
