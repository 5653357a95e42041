// The kernels of image_resample.h: one thread per output row or column of each image works out its
// taps (in double, as the CPU path does) into a table, then one thread per output pixel applies
// them.
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

// One output index's taps along one axis, its weights already divided by their sum.
struct AxisTaps {
  int lo, n;
  float w[kMaxKeptTaps];
};

__device__ Taps axis_taps(const ResampleRow& r, int axis, int o) {
  return axis == 0 ? taps_of(r.box_height, r.resize_height, r.window_top + o)
                   : taps_of(r.box_width, r.resize_width, r.window_left + o);
}

// taps[(row * 2 + axis) * size + o]: grid (count, 2), threads over o.
__global__ void taps_kernel(const ResampleRow* rows, int size, AxisTaps* taps) {
  const ResampleRow r = rows[blockIdx.x];
  for (int o = threadIdx.x; o < size; o += blockDim.x) {
    const Taps t = axis_taps(r, blockIdx.y, o);
    AxisTaps& a = taps[(static_cast<int64_t>(blockIdx.x) * 2 + blockIdx.y) * size + o];
    a.lo = t.lo;
    a.n = t.n;
    for (int k = 0; k < min(t.n, kMaxKeptTaps); ++k) a.w[k] = weight_of(t, k);
  }
}

__global__ void resample_kernel(const ResampleRow* rows, const AxisTaps* taps, int size, Affine a, float* out) {
  const ResampleRow r = rows[blockIdx.y];
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= size * size) return;
  const int oy = p / size, ox = p % size;
  const AxisTaps& ty = taps[(static_cast<int64_t>(blockIdx.y) * 2) * size + oy];
  const AxisTaps& tx = taps[(static_cast<int64_t>(blockIdx.y) * 2 + 1) * size + ox];
  // A shrink by more than ~11x has more taps than the table keeps: those are worked out here.
  const bool kept_y = ty.n <= kMaxKeptTaps, kept_x = tx.n <= kMaxKeptTaps;
  const Taps full_y = kept_y ? Taps{} : axis_taps(r, 0, oy), full_x = kept_x ? Taps{} : axis_taps(r, 1, ox);
  float wx[kMaxKeptTaps];
  if (kept_x)
    for (int kx = 0; kx < tx.n; ++kx) wx[kx] = tx.w[kx];
  float v[3] = {0, 0, 0};
  for (int ky = 0; ky < ty.n; ++ky) {
    const uint8_t* src = r.pixels + (r.box_top + ty.lo + ky) * r.pitch + (r.box_left + tx.lo) * 3;
    float h[3] = {0, 0, 0};
    for (int kx = 0; kx < tx.n; ++kx) {
      const float w = kept_x ? wx[kx] : weight_of(full_x, kx);
      for (int c = 0; c < 3; ++c) h[c] += w * static_cast<float>(src[3 * kx + c]);
    }
    const float w = kept_y ? ty.w[ky] : weight_of(full_y, ky);
    for (int c = 0; c < 3; ++c) v[c] += w * h[c];
  }
  float* dst = out + ((static_cast<int64_t>(r.out_row) * size + oy) * size + (r.flip ? size - 1 - ox : ox)) * 3;
  for (int c = 0; c < 3; ++c) dst[c] = v[c] * a.scale[c] + a.shift[c];
}

}  // namespace

size_t image_resample_scratch_bytes(int count, int size) {
  return static_cast<size_t>(count) * 2 * static_cast<size_t>(size) * sizeof(AxisTaps);
}

void launch_image_resample(const ResampleRow* rows, int count, int size, const float scale[3], const float shift[3],
                           float* out, void* scratch, cudaStream_t stream) {
  if (count == 0) return;
  Affine a;
  for (int c = 0; c < 3; ++c) a.scale[c] = scale[c], a.shift[c] = shift[c];
  auto* taps = static_cast<AxisTaps*>(scratch);
  taps_kernel<<<dim3(count, 2), 128, 0, stream>>>(rows, size, taps);
  check_launch("the image resampling's taps kernel");
  constexpr int kThreads = 256;
  const dim3 grid((size * size + kThreads - 1) / kThreads, count);
  resample_kernel<<<grid, kThreads, 0, stream>>>(rows, taps, size, a, out);
  check_launch("the image resampling kernel");
}

}  // namespace trident::cuda
