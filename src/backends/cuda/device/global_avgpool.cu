// Global average pooling of the cuda backend (launchers in device/pool.h): a thread owns a
// pack of channels (16 bytes, or one channel on the scalar path) and walks rows; sums
// accumulate in f64 like the reference backend (f16/bf16 add groups of eight rows in f32
// first), in a fixed order, so every run gives the same bits.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pool.h"
#include "backends/cuda/device/vector.cuh"
#include "core/error.h"

namespace trident::cuda::device {

namespace {

// x [N, HW, C] viewed per sample as an [HW, C / P] matrix of packs of P channels: P = 16 bytes
// of channels (kPackWidth) when C splits into them and the pointers are 16-byte aligned, else
// P = 1 (the scalar path, the same code). A block of kThreads threads is a pack_tile: tx pack
// columns × ty row lanes; no index is ever divided.

// Rows a forward thread loads before adding any of them (loads in flight per thread).
constexpr int kGapRows = 8;

// Block (bx, by): pack columns bx·tx + threadIdx.x of samples by, by + gridDim.y, …. Each
// thread adds its rows threadIdx.y, threadIdx.y + ty, … in increasing order in f64 (f32 and
// f64 for 16-bit values, below), then the block adds its ty partial sums in a fixed tree over
// threadIdx.y: the same bits on every run.
template <class T, int P>
__global__ void __launch_bounds__(kThreads) global_avgpool_forward_kernel(int64_t N, int64_t HW, int64_t C,
                                                                          const T* __restrict__ x,
                                                                          T* __restrict__ y) {
  __shared__ double partial[P * kThreads];  // [P][ty][tx]
  const unsigned tx = blockDim.x, ty = blockDim.y, lane = threadIdx.y * tx + threadIdx.x;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * tx + threadIdx.x) * P;
  const bool active = c0 < C;
  const int64_t row_step = static_cast<int64_t>(ty) * C;  // elements between a thread's rows
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    double acc[P];
#pragma unroll
    for (int j = 0; j < P; ++j) acc[j] = 0.0;
    if (active) {
      const T* xs = x + (n * HW + threadIdx.y) * C + c0;
      for (int64_t i = threadIdx.y; i < HW; i += kGapRows * static_cast<int64_t>(ty), xs += kGapRows * row_step) {
        ElemPack<T, P> in[kGapRows];
#pragma unroll
        for (int r = 0; r < kGapRows; ++r)
          if (i + r * static_cast<int64_t>(ty) < HW) in[r] = load_pack<P>(xs + r * row_step);
        if constexpr (sizeof(T) == 2) {
          // 16-bit values: the kGapRows rows of one step are added in f32 first (their 8 or 11
          // significant bits leave room in f32's 24), the group sum then in f64: one conversion
          // to f64 per eight elements, conversions to f64 running at 1/8 of the f32 add rate.
          float group[P];
#pragma unroll
          for (int j = 0; j < P; ++j) group[j] = 0.f;
#pragma unroll
          for (int r = 0; r < kGapRows; ++r) {
            if (i + r * static_cast<int64_t>(ty) >= HW) break;
#pragma unroll
            for (int j = 0; j < P; ++j) group[j] = __fadd_rn(group[j], to_float(in[r].v[j]));
          }
#pragma unroll
          for (int j = 0; j < P; ++j) acc[j] += static_cast<double>(group[j]);
        } else {
#pragma unroll
          for (int r = 0; r < kGapRows; ++r) {
            if (i + r * static_cast<int64_t>(ty) >= HW) break;
#pragma unroll
            for (int j = 0; j < P; ++j) acc[j] += static_cast<double>(to_float(in[r].v[j]));
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < P; ++j) partial[j * kThreads + lane] = acc[j];
    __syncthreads();
    for (unsigned half = ty / 2; half > 0; half /= 2) {
      if (threadIdx.y < half) {
#pragma unroll
        for (int j = 0; j < P; ++j) partial[j * kThreads + lane] += partial[j * kThreads + lane + half * tx];
      }
      __syncthreads();
    }
    if (threadIdx.y == 0 && active) {
      ElemPack<T, P> out;
#pragma unroll
      for (int j = 0; j < P; ++j)
        out.v[j] = from_float<T>(static_cast<float>(partial[j * kThreads + lane] / static_cast<double>(HW)));
      store_pack<P>(y + n * C + c0, out);
    }
    __syncthreads();
  }
}

// dx[n, i, c] = dy[n, c] / HW, the same for every i: a thread computes its pack of sample n
// once and stores it to rows by·ty + threadIdx.y + k·gridDim.y·ty of that sample.
// Block (bx, by, bz): pack columns bx·tx + threadIdx.x, samples bz, bz + gridDim.z, ….
template <class T, int P>
__global__ void __launch_bounds__(kThreads) global_avgpool_backward_kernel(int64_t N, int64_t HW, int64_t C,
                                                                           const T* __restrict__ dy,
                                                                           T* __restrict__ dx) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * P;
  if (c0 >= C) return;
  const float scale = __fdiv_rn(1.f, static_cast<float>(HW));
  const int64_t first = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t n = blockIdx.z; n < N; n += gridDim.z) {
    const ElemPack<T, P> d = load_pack<P>(dy + n * C + c0);
    ElemPack<T, P> out;
#pragma unroll
    for (int j = 0; j < P; ++j) out.v[j] = from_float<T>(__fmul_rn(to_float(d.v[j]), scale));
    T* dxs = dx + n * HW * C + c0;
    for (int64_t i = first; i < HW; i += step) store_pack<P>(dxs + i * C, out);
  }
}

constexpr int64_t kMaxGridYZ = 65535;

template <class T, int P>
void launch_global_avgpool_forward_packs(int64_t N, int64_t HW, int64_t C, const T* x, T* y, cudaStream_t stream) {
  const PackTile t = pack_tile(C / P, HW);
  const dim3 grid(t.column_blocks, static_cast<unsigned>(N < kMaxGridYZ ? N : kMaxGridYZ));
  global_avgpool_forward_kernel<T, P><<<grid, dim3(t.tx, t.ty), 0, stream>>>(N, HW, C, x, y);
}

template <class T, int P>
void launch_global_avgpool_backward_packs(int64_t N, int64_t HW, int64_t C, const T* dy, T* dx,
                                          cudaStream_t stream) {
  const PackTile t = pack_tile(C / P, HW);
  const int64_t samples = N < kMaxGridYZ ? N : kMaxGridYZ;
  // Row blocks per sample: enough blocks in all for about two waves, never more than the rows need.
  const int64_t row_blocks = (HW + t.ty - 1) / t.ty;
  const int64_t others = static_cast<int64_t>(t.column_blocks) * samples;
  int64_t chunks = (kMaxBlocks + others - 1) / others;
  chunks = chunks < row_blocks ? chunks : row_blocks;
  chunks = chunks < 1 ? 1 : chunks > kMaxGridYZ ? kMaxGridYZ : chunks;
  const dim3 grid(t.column_blocks, static_cast<unsigned>(chunks), static_cast<unsigned>(samples));
  global_avgpool_backward_kernel<T, P><<<grid, dim3(t.tx, t.ty), 0, stream>>>(N, HW, C, dy, dx);
}

}  // namespace

void launch_global_avgpool_forward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* x, void* y,
                                   cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  if (HW <= 0) throw Error("global average pooling over an empty H×W has no mean");
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kPackWidth<T>;
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (C % W == 0 && all_aligned_16({x, y})) launch_global_avgpool_forward_packs<T, W>(N, HW, C, xp, yp, stream);
    else launch_global_avgpool_forward_packs<T, 1>(N, HW, C, xp, yp, stream);
  });
  check_launch("global_avgpool_forward_kernel");
}

void launch_global_avgpool_backward(ElemType t, int64_t N, int64_t HW, int64_t C, const void* dy, void* dx,
                                    cudaStream_t stream) {
  if (N <= 0 || HW <= 0 || C <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kPackWidth<T>;
    const T* dyp = static_cast<const T*>(dy);
    T* dxp = static_cast<T*>(dx);
    if (C % W == 0 && all_aligned_16({dy, dx}))
      launch_global_avgpool_backward_packs<T, W>(N, HW, C, dyp, dxp, stream);
    else launch_global_avgpool_backward_packs<T, 1>(N, HW, C, dyp, dxp, stream);
  });
  check_launch("global_avgpool_backward_kernel");
}

}  // namespace trident::cuda::device
