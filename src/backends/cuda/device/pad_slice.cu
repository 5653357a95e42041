// pad2d and channel_slice on the GPU. Both copy contiguous runs (a pixel's C channels, a row's
// channel window) and fill the rest, so the run is cut into units of the widest width that
// divides every run length and offset in bytes and both pointers' alignment: 16-byte units
// for channel counts that fill vectors, down to single values otherwise. Indices are 32-bit
// where the tensor allows. A unit of padding holds the fill value repeated.
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pad_slice.h"

namespace trident::cuda::device {

namespace {

// 16 bytes of the fill pattern; a kernel reads its first sizeof(Unit) bytes as one Unit.
struct Fill {
  uint4 bits;
};

template <class Unit>
__device__ __forceinline__ Unit fill_unit(const Fill& f) {
  Unit u;
  memcpy(&u, &f.bits, sizeof(Unit));
  return u;
}

// Units of x per pixel: cu. Output unit i = ((n·ho + i_h)·wo + i_w)·cu + k.
template <class Unit, class Index>
__global__ void pad2d_kernel(const Unit* __restrict__ x, Unit* __restrict__ y, Index total, Index h, Index w,
                             Index cu, Index ho, Index wo, Index top, Index left, Fill fill) {
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const Index cell = i / cu, k = i - cell * cu;
    const Index t = cell / wo, j = cell - t * wo;
    const Index n = t / ho, r = t - n * ho;
    const Index rs = r - top, js = j - left;  // signed Index: negative above and left of x
    y[i] = rs >= 0 && rs < h && js >= 0 && js < w ? x[((n * h + rs) * w + js) * cu + k] : fill_unit<Unit>(fill);
  }
}

template <class Unit, class Index>
__global__ void channel_slice_kernel(const Unit* __restrict__ x, Unit* __restrict__ y, Index total, Index cx,
                                     Index cy, Index start) {
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const Index r = i / cy, k = i - r * cy, s = k + start;
    y[i] = s >= 0 && s < cx ? x[r * cx + s] : Unit{};
  }
}

// The widest unit (bytes) dividing every value of `bytes` and the addresses of `a` and `b`.
size_t unit_bytes(std::initializer_list<int64_t> bytes, const void* a, const void* b) {
  for (size_t u : {size_t{16}, size_t{8}, size_t{4}, size_t{2}}) {
    bool ok = reinterpret_cast<uintptr_t>(a) % u == 0 && reinterpret_cast<uintptr_t>(b) % u == 0;
    for (int64_t v : bytes) ok = ok && (v < 0 ? -v : v) % static_cast<int64_t>(u) == 0;
    if (ok) return u;
  }
  return 1;
}

template <class Unit>
void pad2d_typed(const void* x, void* y, int64_t n, int64_t h, int64_t w, int64_t cu, int64_t ho, int64_t wo,
                 int64_t top, int64_t left, const Fill& fill, cudaStream_t stream) {
  const int64_t total = n * ho * wo * cu;
  const auto* src = static_cast<const Unit*>(x);
  auto* dst = static_cast<Unit*>(y);
  const int64_t in_units = n * h * w * cu;
  // 32-bit indices where every index and intermediate stays below 2^31 (pads are below 2^30).
  if (std::max(total, in_units) < (int64_t{1} << 30) && std::max(ho, wo) < (int64_t{1} << 29) &&
      std::max(std::abs(top), std::abs(left)) < (int64_t{1} << 29))
    pad2d_kernel<Unit, int32_t><<<grid_for(total), kThreads, 0, stream>>>(
        src, dst, static_cast<int32_t>(total), static_cast<int32_t>(h), static_cast<int32_t>(w),
        static_cast<int32_t>(cu), static_cast<int32_t>(ho), static_cast<int32_t>(wo), static_cast<int32_t>(top),
        static_cast<int32_t>(left), fill);
  else
    pad2d_kernel<Unit, int64_t><<<grid_for(total), kThreads, 0, stream>>>(src, dst, total, h, w, cu, ho, wo, top,
                                                                          left, fill);
}

template <class Unit>
void slice_typed(const void* x, void* y, int64_t rows, int64_t cx, int64_t cy, int64_t start, cudaStream_t stream) {
  const int64_t total = rows * cy;
  const auto* src = static_cast<const Unit*>(x);
  auto* dst = static_cast<Unit*>(y);
  if (rows * std::max(cx, cy) < (int64_t{1} << 30) && std::abs(start) < (int64_t{1} << 30))
    channel_slice_kernel<Unit, int32_t><<<grid_for(total), kThreads, 0, stream>>>(
        src, dst, static_cast<int32_t>(total), static_cast<int32_t>(cx), static_cast<int32_t>(cy),
        static_cast<int32_t>(start));
  else
    channel_slice_kernel<Unit, int64_t><<<grid_for(total), kThreads, 0, stream>>>(src, dst, total, cx, cy, start);
}

}  // namespace

void launch_pad2d(const void* x, void* y, int64_t n, int64_t h, int64_t w, int64_t c, int64_t ho, int64_t wo,
                  int64_t top, int64_t left, size_t element_bytes, uint64_t fill_bits, cudaStream_t stream) {
  if (n <= 0 || ho <= 0 || wo <= 0 || c <= 0) return;
  if (element_bytes != 2 && element_bytes != 4 && element_bytes != 8)
    throw Error("pad2d moves 2-, 4- or 8-byte values, not " + std::to_string(element_bytes) + "-byte ones");
  const int64_t es = static_cast<int64_t>(element_bytes);
  const size_t u = unit_bytes({c * es}, x, y);
  Fill fill{};
  auto* bytes = reinterpret_cast<unsigned char*>(&fill.bits);
  for (size_t off = 0; off < sizeof(fill.bits); off += element_bytes) std::memcpy(bytes + off, &fill_bits, element_bytes);
  const int64_t cu = c * es / static_cast<int64_t>(u);
  switch (u) {
    case 16: pad2d_typed<uint4>(x, y, n, h, w, cu, ho, wo, top, left, fill, stream); break;
    case 8: pad2d_typed<uint2>(x, y, n, h, w, cu, ho, wo, top, left, fill, stream); break;
    case 4: pad2d_typed<uint32_t>(x, y, n, h, w, cu, ho, wo, top, left, fill, stream); break;
    default: pad2d_typed<uint16_t>(x, y, n, h, w, cu, ho, wo, top, left, fill, stream); break;
  }
  check_launch("pad2d_kernel");
}

void launch_channel_slice(const void* x, void* y, int64_t rows, int64_t cx, int64_t cy, int64_t start,
                          size_t element_bytes, cudaStream_t stream) {
  if (rows <= 0 || cy <= 0) return;
  if (element_bytes != 2 && element_bytes != 4 && element_bytes != 8)
    throw Error("channel_slice moves 2-, 4- or 8-byte values, not " + std::to_string(element_bytes) + "-byte ones");
  const int64_t es = static_cast<int64_t>(element_bytes);
  const size_t u = unit_bytes({cx * es, cy * es, start * es}, x, y);
  const int64_t k = static_cast<int64_t>(u) / es;  // values per unit
  switch (u) {
    case 16: slice_typed<uint4>(x, y, rows, cx / k, cy / k, start / k, stream); break;
    case 8: slice_typed<uint2>(x, y, rows, cx / k, cy / k, start / k, stream); break;
    case 4: slice_typed<uint32_t>(x, y, rows, cx / k, cy / k, start / k, stream); break;
    default: slice_typed<uint16_t>(x, y, rows, cx / k, cy / k, start / k, stream); break;
  }
  check_launch("channel_slice_kernel");
}

}  // namespace trident::cuda::device
