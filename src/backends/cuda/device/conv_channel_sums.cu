// Deterministic per-channel sums over the rows of an NHWC tensor: the conv bias gradient
// (Σ dy) and, when cuDNN refuses genstats, cbr's batch statistics (Σx, Σx²). Two passes with
// no atomics: blocks of rows write partial sums, then one thread per channel adds them in
// order, so every run gives the same bits.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"

namespace trident::cuda::device {

namespace {

constexpr int kChannelsPerBlock = 32;  // threadIdx.x: consecutive channels, coalesced reads
constexpr int kRowLanes = 8;           // threadIdx.y: rows read side by side

// partials[b·C + c] = Σ over the rows of block b of x[r,c]; partials[B·C + b·C + c] the squares.
template <class T>
__global__ void partial_sums_kernel(const T* __restrict__ x, int64_t rows, int64_t channels, float* partials,
                                    bool squares) {
  __shared__ float sum_tile[kRowLanes][kChannelsPerBlock + 1];
  __shared__ float sq_tile[kRowLanes][kChannelsPerBlock + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kChannelsPerBlock + threadIdx.x;
  const int64_t blocks = gridDim.y;
  float s = 0.f, sq = 0.f;
  if (c < channels) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRowLanes + threadIdx.y; r < rows;
         r += blocks * kRowLanes) {
      const float v = to_float(x[r * channels + c]);
      s += v;
      sq += v * v;
    }
  }
  sum_tile[threadIdx.y][threadIdx.x] = s;
  sq_tile[threadIdx.y][threadIdx.x] = sq;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float total = 0.f, total_sq = 0.f;
    for (int lane = 0; lane < kRowLanes; ++lane) {
      total += sum_tile[lane][threadIdx.x];
      total_sq += sq_tile[lane][threadIdx.x];
    }
    partials[blockIdx.y * channels + c] = total;
    if (squares) partials[(blocks + blockIdx.y) * channels + c] = total_sq;
  }
}

__global__ void combine_partials_kernel(const float* partials, int64_t blocks, int64_t channels, float* sum,
                                        float* sq_sum) {
  for (int64_t c = grid_start(); c < channels; c += grid_stride()) {
    double s = 0.0, sq = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
      s += partials[b * channels + c];
      if (sq_sum) sq += partials[(blocks + b) * channels + c];
    }
    sum[c] = static_cast<float>(s);
    if (sq_sum) sq_sum[c] = static_cast<float>(sq);
  }
}

__global__ void store_channels_kernel(const float* src, void* dst, ElemType t, int64_t channels) {
  for (int64_t c = grid_start(); c < channels; c += grid_stride()) store_from_float(dst, t, c, src[c]);
}

}  // namespace

void launch_channel_sums(ElemType t, const void* x, int64_t rows, int64_t channels, float* partials, float* sum,
                         float* sq_sum, cudaStream_t stream) {
  if (channels <= 0) return;
  const int64_t blocks = channel_sum_row_blocks(rows);
  const dim3 grid(static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock),
                  static_cast<unsigned>(blocks));
  const dim3 block(kChannelsPerBlock, kRowLanes);
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    partial_sums_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(x), rows, channels, partials,
                                                       sq_sum != nullptr);
  });
  check_launch("partial_sums_kernel");
  combine_partials_kernel<<<grid_for(channels), kThreads, 0, stream>>>(partials, blocks, channels, sum, sq_sum);
  check_launch("combine_partials_kernel");
}

void launch_store_channels(const float* src, void* dst, ElemType t, int64_t channels, cudaStream_t stream) {
  if (channels <= 0) return;
  store_channels_kernel<<<grid_for(channels), kThreads, 0, stream>>>(src, dst, t, channels);
  check_launch("store_channels_kernel");
}

}  // namespace trident::cuda::device
