// Deterministic per-channel sums over the rows of an NHWC tensor: the conv bias gradient
// (Σ dy) and, where cbr does not take cuDNN's genstats, its batch statistics (Σx, Σx²). Two
// passes with no atomics: blocks of rows write partial sums, then each channel's partials are
// added in a fixed tree, so every run gives the same bits. The first pass reads 16-byte packs
// of consecutive channels (a scalar pack where C does not split into them or x is
// misaligned) and loads several rows before adding, so it runs near memory bandwidth.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

namespace {

constexpr int kRowsAhead = 4;  // rows loaded before they are added (memory-level parallelism)

// Block (tx pack columns × ty row lanes) `blockIdx.y` of the row blocks: partials[b·C + c] =
// Σ over its rows of x[r, c], partials[B·C + b·C + c] the squares. Each thread adds its rows in
// increasing order; the row lanes are then added in a fixed tree in shared memory.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) partial_sums_kernel(const T* __restrict__ x, int64_t rows,
                                                                int64_t channels, float* __restrict__ partials,
                                                                bool squares) {
  extern __shared__ float tile[];  // [2][blockDim.y][blockDim.x · N]
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  const bool live = c0 < channels;
  float s[N], sq[N];
#pragma unroll
  for (int j = 0; j < N; ++j) s[j] = sq[j] = 0.f;
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  if (live) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += kRowsAhead * step) {
      ElemPack<T, N> v[kRowsAhead];
#pragma unroll
      for (int k = 0; k < kRowsAhead; ++k)
        if (r + k * step < rows) v[k] = load_pack<N>(x + (r + k * step) * channels + c0);
#pragma unroll
      for (int k = 0; k < kRowsAhead; ++k) {
        if (r + k * step >= rows) break;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const float f = to_float(v[k].v[j]);
          s[j] += f;
          sq[j] = __fmaf_rn(f, f, sq[j]);
        }
      }
    }
  }
  const unsigned width = blockDim.x * N, lanes = blockDim.y;
  float* sums = tile;
  float* squares_tile = tile + lanes * width;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    sums[threadIdx.y * width + threadIdx.x * N + j] = s[j];
    squares_tile[threadIdx.y * width + threadIdx.x * N + j] = sq[j];
  }
  __syncthreads();
  for (unsigned half = lanes / 2; half > 0; half /= 2) {
    if (threadIdx.y < half)
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const unsigned at = threadIdx.y * width + threadIdx.x * N + j, from = at + half * width;
        sums[at] += sums[from];
        squares_tile[at] += squares_tile[from];
      }
    __syncthreads();
  }
  if (threadIdx.y == 0 && live) {
    const int64_t blocks = gridDim.y;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (c0 + j >= channels) break;
      partials[blockIdx.y * channels + c0 + j] = sums[threadIdx.x * N + j];
      if (squares) partials[(blocks + blockIdx.y) * channels + c0 + j] = squares_tile[threadIdx.x * N + j];
    }
  }
}

constexpr int kCombineChannels = 32, kCombineLanes = 8;

// Channel c's partials of every row block: lane threadIdx.y adds blocks y, y + 8, … in order
// (in f64), then the lanes are added in a fixed tree.
__global__ void __launch_bounds__(kCombineChannels * kCombineLanes)
    combine_partials_kernel(const float* __restrict__ partials, int64_t blocks, int64_t channels, float* sum,
                            float* sq_sum) {
  __shared__ double shared[2][kCombineLanes][kCombineChannels];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kCombineChannels + threadIdx.x;
  double s = 0.0, sq = 0.0;
  if (c < channels)
    for (int64_t b = threadIdx.y; b < blocks; b += kCombineLanes) {
      s += partials[b * channels + c];
      if (sq_sum) sq += partials[(blocks + b) * channels + c];
    }
  shared[0][threadIdx.y][threadIdx.x] = s;
  shared[1][threadIdx.y][threadIdx.x] = sq;
  __syncthreads();
  for (unsigned half = kCombineLanes / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      shared[0][threadIdx.y][threadIdx.x] += shared[0][threadIdx.y + half][threadIdx.x];
      shared[1][threadIdx.y][threadIdx.x] += shared[1][threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < channels) {
    sum[c] = static_cast<float>(shared[0][0][threadIdx.x]);
    if (sq_sum) sq_sum[c] = static_cast<float>(shared[1][0][threadIdx.x]);
  }
}

__global__ void store_channels_kernel(const float* src, void* dst, ElemType t, int64_t channels) {
  for (int64_t c = grid_start(); c < channels; c += grid_stride()) store_from_float(dst, t, c, src[c]);
}

template <class T, int N>
void launch_partials(const T* x, int64_t rows, int64_t channels, float* partials, bool squares, int64_t blocks,
                     cudaStream_t stream) {
  const int64_t packs = (channels + N - 1) / N;
  // Row lanes: a power of two (the tree), the block's columns covering up to 32 packs.
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < packs) tx *= 2;
  const unsigned ty = kThreads / tx;
  const dim3 grid(static_cast<unsigned>((packs + tx - 1) / tx), static_cast<unsigned>(blocks));
  const size_t shared = 2 * static_cast<size_t>(ty) * tx * N * sizeof(float);
  partial_sums_kernel<T, N><<<grid, dim3(tx, ty), shared, stream>>>(x, rows, channels, partials, squares);
}

}  // namespace

void launch_channel_sums(ElemType t, const void* x, int64_t rows, int64_t channels, float* partials, float* sum,
                         float* sq_sum, cudaStream_t stream) {
  if (channels <= 0) return;
  const int64_t blocks = channel_sum_row_blocks(rows);
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kPackWidth<T>;
    const auto* p = static_cast<const T*>(x);
    if (channels % W == 0 && aligned_16(x)) launch_partials<T, W>(p, rows, channels, partials, sq_sum != nullptr, blocks, stream);
    else launch_partials<T, 1>(p, rows, channels, partials, sq_sum != nullptr, blocks, stream);
  });
  check_launch("partial_sums_kernel");
  launch_combine_channel_partials(partials, blocks, channels, sum, sq_sum, stream);
}

void launch_combine_channel_partials(const float* partials, int64_t blocks, int64_t channels, float* sum,
                                     float* sq_sum, cudaStream_t stream) {
  combine_partials_kernel<<<static_cast<unsigned>((channels + kCombineChannels - 1) / kCombineChannels),
                            dim3(kCombineChannels, kCombineLanes), 0, stream>>>(partials, blocks, channels, sum, sq_sum);
  check_launch("combine_partials_kernel");
}

void launch_store_channels(const float* src, void* dst, ElemType t, int64_t channels, cudaStream_t stream) {
  if (channels <= 0) return;
  store_channels_kernel<<<grid_for(channels), kThreads, 0, stream>>>(src, dst, t, channels);
  check_launch("store_channels_kernel");
}

}  // namespace trident::cuda::device
