// layernorm and its backward on the GPU. One warp per row: the row's mean and biased variance
// in two passes over x (f32 accumulation, the row stays in L1/L2 between passes), then y in a
// third. The backward's warp recomputes the statistics, then the row means of g = dy·γ and
// g·x̂, and writes dx; dgamma and dbeta are column sums over the rows, taken per chunk of rows
// into a workspace and then over the chunks in order (deterministic, no atomics).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/layernorm.h"

namespace trident::cuda::device {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int64_t kRowsPerChunk = 256;  // rows one column-sum thread adds up

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The mean and inverse deviation of row `x` of `c` values, every lane of the warp getting both.
template <class T>
__device__ __forceinline__ void row_statistics(const T* x, int64_t c, float eps, int lane, float& mean,
                                               float& invstd) {
  float s = 0.f;
  for (int64_t k = lane; k < c; k += 32) s += to_float(x[k]);
  mean = warp_sum(s) / static_cast<float>(c);
  float q = 0.f;
  for (int64_t k = lane; k < c; k += 32) {
    const float d = to_float(x[k]) - mean;
    q += d * d;
  }
  invstd = rsqrtf(warp_sum(q) / static_cast<float>(c) + eps);
}

template <class T>
__global__ void layernorm_kernel(LayerNormArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < a.rows; r += warps) {
    const T* x = static_cast<const T*>(a.x) + r * a.channels;
    T* y = static_cast<T*>(a.y) + r * a.channels;
    float mean, invstd;
    row_statistics(x, a.channels, a.eps, lane, mean, invstd);
    for (int64_t k = lane; k < a.channels; k += 32)
      y[k] = from_float<T>((to_float(x[k]) - mean) * invstd * load_as_float(a.gamma, a.param, k) +
                            load_as_float(a.beta, a.param, k));
  }
}

// dx, and each row's mean and invstd into `stats` (2 floats a row) for the column sums.
template <class T>
__global__ void layernorm_backward_rows_kernel(LayerNormArgs a, float* stats) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const float inv_c = 1.f / static_cast<float>(a.channels);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < a.rows; r += warps) {
    const T* x = static_cast<const T*>(a.x) + r * a.channels;
    const T* dy = static_cast<const T*>(a.dy) + r * a.channels;
    T* dx = static_cast<T*>(a.dx) + r * a.channels;
    float mean, invstd;
    row_statistics(x, a.channels, a.eps, lane, mean, invstd);
    float sg = 0.f, sgx = 0.f;
    for (int64_t k = lane; k < a.channels; k += 32) {
      const float g = to_float(dy[k]) * load_as_float(a.gamma, a.param, k);
      sg += g;
      sgx += g * (to_float(x[k]) - mean) * invstd;
    }
    const float mean_g = warp_sum(sg) * inv_c, mean_gx = warp_sum(sgx) * inv_c;
    for (int64_t k = lane; k < a.channels; k += 32) {
      const float xhat = (to_float(x[k]) - mean) * invstd;
      dx[k] = from_float<T>(invstd * (to_float(dy[k]) * load_as_float(a.gamma, a.param, k) - mean_g - xhat * mean_gx));
    }
    if (lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = invstd;
    }
  }
}

// partial[chunk][k] = (Σ dy·x̂, Σ dy) over the chunk's rows, one thread per (chunk, channel).
template <class T>
__global__ void layernorm_column_partials_kernel(LayerNormArgs a, const float* stats, float* partial,
                                                 int64_t chunks) {
  for (int64_t o = grid_start(); o < chunks * a.channels; o += grid_stride()) {
    const int64_t chunk = o / a.channels, k = o - chunk * a.channels;
    const int64_t end = min(a.rows, (chunk + 1) * kRowsPerChunk);
    float sg = 0.f, sb = 0.f;
    for (int64_t r = chunk * kRowsPerChunk; r < end; ++r) {
      const float d = to_float(static_cast<const T*>(a.dy)[r * a.channels + k]);
      const float xhat = (to_float(static_cast<const T*>(a.x)[r * a.channels + k]) - stats[2 * r]) * stats[2 * r + 1];
      sg += d * xhat;
      sb += d;
    }
    partial[2 * o] = sg;
    partial[2 * o + 1] = sb;
  }
}

__global__ void layernorm_column_sums_kernel(const float* partial, int64_t chunks, int64_t channels, void* dgamma,
                                             void* dbeta, ElemType param) {
  for (int64_t k = grid_start(); k < channels; k += grid_stride()) {
    float sg = 0.f, sb = 0.f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      sg += partial[2 * (chunk * channels + k)];
      sb += partial[2 * (chunk * channels + k) + 1];
    }
    store_from_float(dgamma, param, k, sg);
    store_from_float(dbeta, param, k, sb);
  }
}

int64_t chunks_of(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
}

}  // namespace

void launch_layernorm(ElemType t, const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.channels <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    layernorm_kernel<T><<<row_blocks(a.rows), kWarpsPerBlock * 32, 0, stream>>>(a);
  });
  check_launch("layernorm_kernel");
}

size_t layernorm_backward_workspace(int64_t rows, int64_t channels) {
  return static_cast<size_t>(2 * rows + 2 * chunks_of(rows) * channels) * sizeof(float);
}

void launch_layernorm_backward(ElemType t, const LayerNormArgs& a, void* workspace, cudaStream_t stream) {
  if (a.rows <= 0 || a.channels <= 0) return;
  float* stats = static_cast<float*>(workspace);
  float* partial = stats + 2 * a.rows;
  const int64_t chunks = chunks_of(a.rows);
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    layernorm_backward_rows_kernel<T><<<row_blocks(a.rows), kWarpsPerBlock * 32, 0, stream>>>(a, stats);
    layernorm_column_partials_kernel<T><<<grid_for(chunks * a.channels), kThreads, 0, stream>>>(a, stats, partial,
                                                                                                chunks);
  });
  layernorm_column_sums_kernel<<<grid_for(a.channels), kThreads, 0, stream>>>(partial, chunks, a.channels, a.dgamma,
                                                                               a.dbeta, a.param);
  check_launch("layernorm_backward_kernel");
}

}  // namespace trident::cuda::device
