// Batchnorm kernels of the cuda backend over [M, C] activations (NHWC, M = N·H·W).
// Phase 1 (partial sums): a (channels × rows) block per (channel tile, row chunk); each
// thread keeps f64 sums for its channel over a strided subset of the chunk's rows, and the
// block adds its rows' sums in a fixed tree order into the workspace. Phase 2 (finalize): one
// thread per channel adds the chunks in order and writes statistics, gradients and the f32
// coefficients of phase 3 (apply), which rewrites every element with per-channel constants.
// No floating-point atomics anywhere: every result is the same bits on every run.
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/device/common.cuh"

namespace trident::cuda::device {

namespace {

constexpr int64_t kMaxGridY = 65535;
constexpr int kCoefficients = 4;  // f32 values per channel after the partial sums

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Where the workspace keeps the partial sums ([2][chunks][C] f64) and the coefficients.
double* partial_sums(void* workspace) { return static_cast<double*>(workspace); }
float* coefficients(void* workspace, const ChannelReductionPlan& plan) {
  const size_t partial_bytes = align_up(sizeof(double) * 2 * plan.row_chunks * static_cast<size_t>(plan.C));
  return reinterpret_cast<float*>(static_cast<char*>(workspace) + partial_bytes);
}

__device__ __forceinline__ float load(const ChannelTensor& t, int64_t c) { return load_as_float(t.data, t.type, c); }
__device__ __forceinline__ void store(const ChannelTensor& t, int64_t c, double v) {
  store_from_float(t.data, t.type, c, static_cast<float>(v));
}

// This thread's channel and the row range of its block's chunk.
struct ChunkRows {
  int64_t c, begin, end;
};
__device__ __forceinline__ ChunkRows chunk_rows(int64_t M, int64_t rows_per_chunk) {
  ChunkRows r;
  r.c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  r.begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  r.end = r.begin + rows_per_chunk < M ? r.begin + rows_per_chunk : M;
  return r;
}

// Adds the block's per-thread sums over threadIdx.y in a fixed tree order (blockDim.y is a
// power of two) and writes the chunk's two partial sums of channel c.
__device__ void write_block_partials(double s1, double s2, int64_t c, int64_t C, double* partial) {
  __shared__ double shared[2][kThreads];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  shared[0][t] = s1;
  shared[1][t] = s2;
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      shared[0][t] += shared[0][t + half * blockDim.x];
      shared[1][t] += shared[1][t + half * blockDim.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < C) {
    const int64_t chunks = gridDim.y;
    partial[static_cast<int64_t>(blockIdx.y) * C + c] = shared[0][t];
    partial[(chunks + blockIdx.y) * C + c] = shared[1][t];
  }
}

// Σx and Σx² per channel and chunk.
template <class T>
__global__ void moments_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                       double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1 = 0.0, s2 = 0.0;
  if (r.c < C) {
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const double v = to_float(x[m * C + r.c]);
      s1 += v;
      s2 += v * v;
    }
  }
  write_block_partials(s1, s2, r.c, C, partial);
}

// Σdz and Σdz·(x − mean) per channel and chunk, dz = dy (masked by y > 0 when y is given).
template <class T>
__global__ void gradient_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                        const T* __restrict__ dy, const T* __restrict__ relu_output,
                                        ChannelTensor saved_mean, double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1 = 0.0, s2 = 0.0;
  if (r.c < C) {
    const float mean = load(saved_mean, r.c);
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const int64_t i = m * C + r.c;
      float dz = to_float(dy[i]);
      if (relu_output && !(to_float(relu_output[i]) > 0.f)) dz = 0.f;
      s1 += dz;
      s2 += static_cast<double>(dz) * static_cast<double>(__fsub_rn(to_float(x[i]), mean));
    }
  }
  write_block_partials(s1, s2, r.c, C, partial);
}

// Sums of channel c over every chunk, in chunk order.
__device__ __forceinline__ void channel_totals(const double* partial, int64_t chunks, int64_t C, int64_t c,
                                               double& s1, double& s2) {
  s1 = 0.0;
  s2 = 0.0;
  for (int64_t k = 0; k < chunks; ++k) {
    s1 += partial[k * C + c];
    s2 += partial[(chunks + k) * C + c];
  }
}

__global__ void train_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                                      BatchNormTrainArgs a, float* __restrict__ coef) {
  for (int64_t c = grid_start(); c < C; c += grid_stride()) {
    double s1, s2;
    channel_totals(partial, chunks, C, c, s1, s2);
    const double mean = s1 / static_cast<double>(M);
    double var = s2 / static_cast<double>(M) - mean * mean;
    if (var < 0.0) var = 0.0;  // rounding can leave a tiny negative for a constant channel
    const double invstd = 1.0 / sqrt(var + a.eps);
    const double gamma = load(a.gamma, c), beta = load(a.beta, c);
    const double rm = load(a.running_mean, c), rv = load(a.running_var, c);
    const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
    store(a.saved_mean, c, mean);
    store(a.saved_invstd, c, invstd);
    store(a.running_mean_out, c, (1.0 - a.momentum) * rm + a.momentum * mean);
    store(a.running_var_out, c, (1.0 - a.momentum) * rv + a.momentum * var * unbias);
    coef[c] = static_cast<float>(invstd * gamma);                   // scale
    coef[C + c] = static_cast<float>(beta - mean * invstd * gamma);  // shift
  }
}

// y = x·scale[c] + shift[c]; scale and shift come from the finalize kernel (training) or from
// the running statistics (coef == nullptr, inference). x and y may be the same memory.
template <class T>
__global__ void affine_apply_kernel(int64_t M, int64_t C, const T* x, T* y, const float* __restrict__ coef,
                                    BatchNormInferArgs infer) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float scale, shift;
  if (coef) {
    scale = coef[c];
    shift = coef[C + c];
  } else {
    const double invstd = 1.0 / sqrt(static_cast<double>(load(infer.running_var, c)) + infer.eps);
    const double gamma = load(infer.gamma, c);
    scale = static_cast<float>(invstd * gamma);
    shift = static_cast<float>(load(infer.beta, c) - load(infer.running_mean, c) * invstd * gamma);
  }
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    y[i] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[i]), scale), shift));
  }
}

__global__ void backward_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                                         BatchNormBackwardArgs a, float* __restrict__ coef) {
  for (int64_t c = grid_start(); c < C; c += grid_stride()) {
    double dbeta, centred;
    channel_totals(partial, chunks, C, c, dbeta, centred);
    const double invstd = load(a.saved_invstd, c);
    const double dgamma = centred * invstd;
    store(a.dgamma, c, dgamma);
    store(a.dbeta, c, dbeta);
    coef[c] = static_cast<float>(static_cast<double>(load(a.gamma, c)) * invstd);    // γ·invstd
    coef[C + c] = static_cast<float>(dbeta / static_cast<double>(M));                  // dβ / M
    coef[2 * C + c] = static_cast<float>(invstd * dgamma / static_cast<double>(M));    // invstd·dγ / M
    coef[3 * C + c] = load(a.saved_mean, c);
  }
}

// dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M), and dresidual = dz when asked.
// Every element is read before it is written by the same thread, so outputs may alias inputs.
template <class T>
__global__ void backward_apply_kernel(int64_t M, int64_t C, const T* x, const T* dy, const T* relu_output, T* dx,
                                      T* dresidual, const float* __restrict__ coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float g = coef[c], db = coef[C + c], k = coef[2 * C + c], mean = coef[3 * C + c];
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    float dz = to_float(dy[i]);
    if (relu_output && !(to_float(relu_output[i]) > 0.f)) dz = 0.f;
    const float centred = __fsub_rn(to_float(x[i]), mean);
    dx[i] = from_float<T>(__fmul_rn(g, __fsub_rn(__fsub_rn(dz, db), __fmul_rn(centred, k))));
    if (dresidual) dresidual[i] = from_float<T>(dz);
  }
}

template <class T>
__global__ void fold_kernel(FoldBatchNormArgs a) {
  const int64_t weights = a.K * a.per_k, total = weights > a.K ? weights : a.K;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    if (i < weights) {
      const int64_t k = i / a.per_k;
      const double scale = static_cast<double>(load(a.gamma, k)) / sqrt(static_cast<double>(load(a.var, k)) + a.eps);
      static_cast<T*>(a.w_folded)[i] =
          from_float<T>(static_cast<float>(static_cast<double>(to_float(static_cast<const T*>(a.w)[i])) * scale));
    }
    if (i < a.K) {
      const double scale = static_cast<double>(load(a.gamma, i)) / sqrt(static_cast<double>(load(a.var, i)) + a.eps);
      const double b = a.bias.data ? static_cast<double>(load(a.bias, i)) : 0.0;
      store(a.b_folded, i, (b - load(a.mean, i)) * scale + load(a.beta, i));
    }
  }
}

// Grid of the apply kernels: channel tiles × enough row blocks to fill the GPU.
dim3 apply_grid(const ChannelReductionPlan& plan) {
  const int64_t row_blocks = ceil_div(plan.M > 0 ? plan.M : 1, plan.tile_rows);
  const int64_t per_tile = ceil_div(kMaxBlocks * 2, plan.channel_tiles);
  int64_t y = row_blocks < per_tile ? row_blocks : per_tile;
  if (y > kMaxGridY) y = kMaxGridY;
  return dim3(plan.channel_tiles, static_cast<unsigned>(y < 1 ? 1 : y));
}

}  // namespace

ChannelReductionPlan plan_channel_reduction(int64_t M, int64_t C, int sm_count) {
  ChannelReductionPlan plan;
  plan.M = M;
  plan.C = C;
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < C) tx *= 2;
  plan.tile_channels = tx;
  plan.tile_rows = kThreads / tx;
  const int64_t tiles = ceil_div(C > 0 ? C : 1, tx);
  if (tiles > 0x7fffffff) throw Error("batchnorm over " + std::to_string(C) + " channels is more than one launch covers");
  plan.channel_tiles = static_cast<unsigned>(tiles);
  // About eight blocks per multiprocessor, never a chunk thinner than one block of rows.
  const int64_t target_blocks = 8 * static_cast<int64_t>(sm_count > 0 ? sm_count : 132);
  const int64_t most_chunks = std::min<int64_t>(kMaxGridY, std::max<int64_t>(1, ceil_div(M, plan.tile_rows)));
  int64_t chunks = std::clamp<int64_t>(ceil_div(target_blocks, tiles), 1, most_chunks);
  plan.rows_per_chunk = M > 0 ? ceil_div(M, chunks) : 0;
  chunks = M > 0 ? ceil_div(M, plan.rows_per_chunk) : 1;
  plan.row_chunks = static_cast<unsigned>(chunks);
  plan.workspace_bytes = align_up(sizeof(double) * 2 * static_cast<size_t>(chunks) * static_cast<size_t>(C)) +
                         sizeof(float) * kCoefficients * static_cast<size_t>(C);
  return plan;
}

void launch_batchnorm_train(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                            void* workspace, cudaStream_t stream) {
  if (plan.C <= 0) return;
  if (plan.M < 2) throw Error("batchnorm training needs more than one value per channel");
  double* partial = partial_sums(workspace);
  float* coef = coefficients(workspace, plan);
  const dim3 block(plan.tile_channels, plan.tile_rows);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    moments_partial_kernel<T><<<dim3(plan.channel_tiles, plan.row_chunks), block, 0, stream>>>(
        plan.M, plan.C, plan.rows_per_chunk, static_cast<const T*>(args.x), partial);
    check_launch("batchnorm moments_partial_kernel");
    train_finalize_kernel<<<grid_for(plan.C), kThreads, 0, stream>>>(plan.M, plan.C, plan.row_chunks, partial, args,
                                                                     coef);
    check_launch("batchnorm train_finalize_kernel");
    affine_apply_kernel<T><<<apply_grid(plan), block, 0, stream>>>(plan.M, plan.C, static_cast<const T*>(args.x),
                                                                   static_cast<T*>(args.y), coef, BatchNormInferArgs{});
    check_launch("batchnorm affine_apply_kernel");
  });
}

void launch_batchnorm_infer(ElemType act, const ChannelReductionPlan& plan, const BatchNormInferArgs& args,
                            cudaStream_t stream) {
  if (plan.C <= 0 || plan.M <= 0) return;
  const dim3 block(plan.tile_channels, plan.tile_rows);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    affine_apply_kernel<T><<<apply_grid(plan), block, 0, stream>>>(plan.M, plan.C, static_cast<const T*>(args.x),
                                                                   static_cast<T*>(args.y), nullptr, args);
  });
  check_launch("batchnorm affine_apply_kernel (inference)");
}

void launch_batchnorm_backward(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                               void* workspace, cudaStream_t stream) {
  if (plan.C <= 0) return;
  double* partial = partial_sums(workspace);
  float* coef = coefficients(workspace, plan);
  const dim3 block(plan.tile_channels, plan.tile_rows);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    const T* dy = static_cast<const T*>(args.dy);
    const T* mask = static_cast<const T*>(args.relu_output);
    gradient_partial_kernel<T><<<dim3(plan.channel_tiles, plan.row_chunks), block, 0, stream>>>(
        plan.M, plan.C, plan.rows_per_chunk, x, dy, mask, args.saved_mean, partial);
    check_launch("batchnorm gradient_partial_kernel");
    backward_finalize_kernel<<<grid_for(plan.C), kThreads, 0, stream>>>(plan.M, plan.C, plan.row_chunks, partial,
                                                                        args, coef);
    check_launch("batchnorm backward_finalize_kernel");
    if (plan.M > 0) {
      backward_apply_kernel<T><<<apply_grid(plan), block, 0, stream>>>(
          plan.M, plan.C, x, dy, mask, static_cast<T*>(args.dx), static_cast<T*>(args.dresidual), coef);
      check_launch("batchnorm backward_apply_kernel");
    }
  });
}

void launch_fold_batchnorm(const FoldBatchNormArgs& args, cudaStream_t stream) {
  const int64_t total = std::max(args.K * args.per_k, args.K);
  if (total <= 0) return;
  dispatch_elem(args.w_type, [&](auto tag) {
    using T = decltype(tag);
    fold_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(args);
  });
  check_launch("fold_batchnorm fold_kernel");
}

}  // namespace trident::cuda::device
