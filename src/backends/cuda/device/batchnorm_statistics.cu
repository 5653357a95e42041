// Phases 1 and 2 of the batchnorm kernels over [M, C] activations (NHWC, M = N·H·W): the
// deterministic per-channel sums and their finalize, and the plan that splits [M, C] for them.
// Phase 1 (partial sums): a (channel columns × rows) block per (channel tile, row chunk);
// each thread keeps sums for its channels over its rows (f64 for the moments, f32 for the
// gradient sums: see vector_partial_kernel), and the block adds its rows' sums in f64 in a
// fixed tree order into the workspace. Phase 2 (finalize): a block of 32 channels ×
// 32 lanes, each lane adding every 32nd chunk in order and the lanes then added in a fixed
// tree, writes statistics, gradients and the f32 coefficients of phase 3 (the apply kernels of
// batchnorm_forward.cu and batchnorm_backward.cu). Under sync-BN (RankSum, batchnorm.h) phase 2
// first reduces the chunks to this rank's totals, the caller's collective sums them over the
// ranks, and the finalize reads the result as partial sums of a single chunk.
//
// Two layouts of the same math. Vector path (C a multiple of the 16-byte width, every
// activation pointer 16-byte aligned): a thread owns 16 consecutive bytes of one row, i.e.
// 4 f32 or 8 f16/bf16 channels, loads them as one uint4 and converts them to f32 in
// registers; its rows are m = blockIdx.y·tile_y + threadIdx.y + k·gridDim.y·tile_y, and
// the grid holds as many blocks as the GPU keeps resident, so one wave streams the tensor.
// Scalar path (anything else): one channel per thread, a contiguous chunk of rows per block.
// No floating-point atomics anywhere: every result is the same bits on every run.
#include "backends/cuda/device/batchnorm_detail.cuh"

namespace trident::cuda::device {

using namespace batchnorm_detail;

namespace {

// Adds the block's per-thread sums (N channels from c0 on) over threadIdx.y in a fixed tree
// order (blockDim.y a power of two, blockDim.x·blockDim.y == kThreads) and writes the
// chunk's two partial sums of those channels; the chunk is blockIdx.y of gridDim.y.
template <int N>
__device__ void write_block_partials(const double (&s1)[N], const double (&s2)[N], int64_t c0, int64_t C,
                                     double* partial) {
  __shared__ double shared[2 * N][kThreads];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    shared[j][t] = s1[j];
    shared[N + j][t] = s2[j];
  }
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
#pragma unroll
      for (int j = 0; j < 2 * N; ++j) shared[j][t] += shared[j][t + half * blockDim.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && c0 < C) {
    const int64_t chunks = gridDim.y;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      partial[static_cast<int64_t>(blockIdx.y) * C + c0 + j] = shared[j][t];
      partial[(chunks + blockIdx.y) * C + c0 + j] = shared[N + j][t];
    }
  }
}

// Scalar path: this thread's channel and the row range of its block's chunk.
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

// Σx and Σx² per channel and chunk (scalar path).
template <class T>
__global__ void moments_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                       double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1[1] = {0.0}, s2[1] = {0.0};
  if (r.c < C) {
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const double v = to_float(x[m * C + r.c]);
      s1[0] += v;
      s2[0] += v * v;
    }
  }
  write_block_partials<1>(s1, s2, r.c, C, partial);
}

// Σdz and Σdz·(x − mean) per channel and chunk, dz = dy [+ dy_other] (masked when a mask
// is given) (scalar path). With dz_out, dz is also stored there (it is exactly a T value),
// so the apply reads one tensor instead of dy, dy_other and the mask again. dz_out may be dy's
// buffer (reuse_gradient_buffer): each element is read before the same thread writes it.
template <class T>
__global__ void gradient_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                        const T* dy, const T* __restrict__ dy_other,
                                        MaskSource<T> mask, PooledDy<T> pooled, ChannelTensor saved_mean,
                                        T* dz_out, double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1[1] = {0.0}, s2[1] = {0.0};
  if (r.c < C) {
    const float mean = load(saved_mean, r.c);
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const int64_t i = m * C + r.c;
      const float xf = to_float(x[i]);
      float dz = pooled.any() ? pooled.at(dy, m, r.c) : to_float(dy[i]);
      if (dy_other) dz = gradient_sum<T>(dz, to_float(dy_other[i]));
      if (mask.any() && !mask.on(m, r.c, i, xf)) dz = 0.f;
      if (dz_out) dz_out[i] = from_float<T>(dz);
      s1[0] += dz;
      s2[0] += static_cast<double>(dz) * static_cast<double>(__fsub_rn(xf, mean));
    }
  }
  write_block_partials<1>(s1, s2, r.c, C, partial);
}

// What a vector partial-sum kernel adds up.
enum class Sums { moments, gradient, masked_gradient };

// Vector path of both partial-sum kernels above: the same per-element math on 16-byte
// vectors. Each thread walks its rows in increasing order, loading `kRows` rows ahead of
// the additions, so its sums are added in the same order on every run. Three blocks a
// multiprocessor (at most 80 registers): with one, as f64 sums and two rows in flight made it,
// the masked reduction ran at 2.6 TB/s on an H200; now at 3.7. Pooled: dy is a max pooling's
// gradient, gathered per row through its window index (PooledDy).
template <class T, Sums S, bool Pooled = false>
__global__ void __launch_bounds__(kThreads, 3) vector_partial_kernel(int64_t M, int64_t C, const T* __restrict__ x,
                                                                  const T* dy,
                                                                  const T* __restrict__ dy_other,
                                                                  MaskSource<T> mask,
                                                                  PooledDy<T> pooled,
                                                                  ChannelTensor saved_mean,
                                                                  T* dz_out,
                                                                  double* __restrict__ partial) {
  constexpr int N = kWidth<T>;
  constexpr int kRows = S == Sums::moments ? 4 : S == Sums::gradient ? 2 : 1;
  // A thread's own sums: f64 for the moments, whose variance E[x²] − mean² cancels; f32 for the
  // gradient sums (Σdz and the already centred Σdz·(x − mean)), which frees the registers of
  // the third block. The block's and the chunks' sums are f64 either way.
  using Acc = std::conditional_t<S == Sums::moments, double, float>;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  Acc s1[N], s2[N];
#pragma unroll
  for (int j = 0; j < N; ++j) s1[j] = s2[j] = Acc{0};
  if (c0 < C) {
    float mean[N];
    VectorAffine<T> affine;
    if constexpr (S != Sums::moments) {
#pragma unroll
      for (int j = 0; j < N; ++j) mean[j] = load(saved_mean, c0 + j);
    }
    if constexpr (S == Sums::masked_gradient) affine.load(mask, c0);
    const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
    for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
      uint4 xv[kRows], dv[kRows], ov[kRows], yv[kRows];
      unsigned bv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = m + r * step;
        if (row < M) {
          const int64_t i = row * C + c0;
          xv[r] = load_vector(x + i);
          if constexpr (S != Sums::moments) dv[r] = Pooled ? pooled.vector_at(dy, row, c0) : load_vector(dy + i);
          if constexpr (S != Sums::moments)
            if (dy_other) ov[r] = load_vector(dy_other + i);
          if constexpr (S == Sums::masked_gradient) {
            if (mask.bits) bv[r] = mask.byte_from(row, c0);
            else if (mask.y) yv[r] = load_vector(mask.y + i);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (m + r * step >= M) break;
        float xf[N];
        to_floats<T>(xv[r], xf);
        if constexpr (S == Sums::moments) {
#pragma unroll
          for (int j = 0; j < N; ++j) {
            const double v = xf[j];
            s1[j] += v;
            s2[j] += v * v;
          }
        } else {
          float dz[N];
          to_floats<T>(dv[r], dz);
          if (dy_other) add_gradient<T>(ov[r], dz);
          if constexpr (S == Sums::masked_gradient) mask_gradient<T>(mask, yv[r], bv[r], xf, affine, dz);
          if (dz_out) store_vector(dz_out + (m + r * step) * C + c0, from_floats<T>(dz));
#pragma unroll
          for (int j = 0; j < N; ++j) {
            s1[j] = __fadd_rn(s1[j], dz[j]);
            s2[j] = __fmaf_rn(dz[j], __fsub_rn(xf[j], mean[j]), s2[j]);
          }
        }
      }
    }
  }
  double d1[N], d2[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    d1[j] = s1[j];
    d2[j] = s2[j];
  }
  write_block_partials<N>(d1, d2, c0, C, partial);
}

// ---- phase 2: finalize ------------------------------------------------------------------

// Sums of channel c over every chunk: lane threadIdx.y adds chunks y, y + kFinalizeLanes, … in order,
// then the lanes are added in a fixed tree. Every thread of the block must call it.
__device__ void channel_totals(const double* partial, int64_t chunks, int64_t C, int64_t c, double& s1,
                               double& s2) {
  __shared__ double shared[2][kFinalizeLanes][kFinalizeChannels];
  double a = 0.0, b = 0.0;
  if (c < C) {
#pragma unroll 4
    for (int64_t k = threadIdx.y; k < chunks; k += kFinalizeLanes) {
      a += partial[k * C + c];
      b += partial[(chunks + k) * C + c];
    }
  }
  shared[0][threadIdx.y][threadIdx.x] = a;
  shared[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  for (unsigned half = kFinalizeLanes / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      shared[0][threadIdx.y][threadIdx.x] += shared[0][threadIdx.y + half][threadIdx.x];
      shared[1][threadIdx.y][threadIdx.x] += shared[1][threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  s1 = shared[0][0][threadIdx.x];
  s2 = shared[1][0][threadIdx.x];
}

__device__ __forceinline__ int64_t finalize_channel() {
  return static_cast<int64_t>(blockIdx.x) * kFinalizeChannels + threadIdx.x;
}

__global__ void __launch_bounds__(kFinalizeChannels * kFinalizeLanes)
    train_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                          BatchNormTrainArgs a, float* __restrict__ coef) {
  const int64_t c = finalize_channel();
  double s1, s2;
  channel_totals(partial, chunks, C, c, s1, s2);
  if (threadIdx.y != 0 || c >= C) return;
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

// dγ and dβ from this rank's sums; the apply's coefficients from the sums over the ranks
// (`global`, [2][C], with M the global row count) under sync-BN, from the same local sums else.
__global__ void __launch_bounds__(kFinalizeChannels * kFinalizeLanes)
    backward_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                             const double* __restrict__ global, BatchNormBackwardArgs a, float* __restrict__ coef) {
  const int64_t c = finalize_channel();
  double dbeta, centred;
  channel_totals(partial, chunks, C, c, dbeta, centred);
  if (threadIdx.y != 0 || c >= C) return;
  const double invstd = load(a.saved_invstd, c);
  store(a.dgamma, c, centred * invstd);
  store(a.dbeta, c, dbeta);
  if (global) {
    dbeta = global[c];
    centred = global[C + c];
  }
  const double dgamma = centred * invstd;
  coef[c] = static_cast<float>(static_cast<double>(load(a.gamma, c)) * invstd);  // γ·invstd
  coef[C + c] = static_cast<float>(dbeta / static_cast<double>(M));                // dβ / M
  coef[2 * C + c] = static_cast<float>(invstd * dgamma / static_cast<double>(M));  // invstd·dγ / M
  coef[3 * C + c] = load(a.saved_mean, c);
}

// Sync-BN: the two sums of every channel over this rank's chunks, as [2][C] — the layout of
// partial sums of one chunk, so the finalize reads them (after the collective) with chunks = 1
// and adds nothing else: at one rank the statistics are the bits of the unsynced path.
__global__ void __launch_bounds__(kFinalizeChannels * kFinalizeLanes)
    rank_totals_kernel(int64_t C, int64_t chunks, const double* __restrict__ partial, double* __restrict__ totals) {
  const int64_t c = finalize_channel();
  double s1, s2;
  channel_totals(partial, chunks, C, c, s1, s2);
  if (threadIdx.y != 0 || c >= C) return;
  totals[c] = s1;
  totals[C + c] = s2;
}

// Tile shape for `columns` thread columns (channels, or channel vectors): up to 32 columns ×
// enough rows for kThreads threads.
ChannelTiling tile_columns(int64_t columns, unsigned vector) {
  ChannelTiling t;
  t.vector = vector;
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < columns) tx *= 2;
  t.tile_x = tx;
  t.tile_y = kThreads / tx;
  const int64_t tiles = ceil_div(columns > 0 ? columns : 1, tx);
  if (tiles > 0x7fffffff) throw Error("batchnorm over " + std::to_string(columns) + " channel columns is more than one launch covers");
  t.channel_tiles = static_cast<unsigned>(tiles);
  return t;
}

dim3 finalize_grid(int64_t C) { return dim3(static_cast<unsigned>(ceil_div(C, kFinalizeChannels))); }
const dim3 kFinalizeBlock(kFinalizeChannels, kFinalizeLanes);

}  // namespace

ChannelReductionPlan plan_channel_reduction(int64_t M, int64_t C, ElemType act, int sm_count) {
  ChannelReductionPlan plan;
  plan.M = M;
  plan.C = C;
  plan.sm_count = sm_count > 0 ? sm_count : 132;
  // Scalar path: about eight blocks per multiprocessor, never a chunk thinner than one block
  // of rows.
  ChannelTiling& s = plan.scalar;
  s = tile_columns(C, 1);
  const int64_t target_blocks = 8 * static_cast<int64_t>(plan.sm_count);
  const int64_t most_chunks = std::min<int64_t>(kMaxGridY, std::max<int64_t>(1, ceil_div(M, s.tile_y)));
  int64_t chunks = std::clamp<int64_t>(ceil_div(target_blocks, s.channel_tiles), 1, most_chunks);
  s.rows_per_chunk = M > 0 ? ceil_div(M, chunks) : 0;
  chunks = M > 0 ? ceil_div(M, s.rows_per_chunk) : 1;
  s.row_chunks = static_cast<unsigned>(chunks);
  int64_t max_chunks = chunks;
  // Vector path: one wave of the partial-sum kernel (the fewest resident blocks of its
  // variants for this dtype), a chunk being the rows that one row of blocks walks.
  const int64_t width = kVectorBytes / static_cast<int64_t>(act == ElemType::f32 ? 4 : 2);
  if (C > 0 && C % width == 0) {
    ChannelTiling& v = plan.vector;
    v = tile_columns(C / width, static_cast<unsigned>(width));
    int64_t per_sm = 1;
    dispatch_elem(act, [&](auto tag) {
      using T = decltype(tag);
      per_sm = std::min({blocks_per_sm<vector_partial_kernel<T, Sums::moments>>(),
                         blocks_per_sm<vector_partial_kernel<T, Sums::gradient>>(),
                         blocks_per_sm<vector_partial_kernel<T, Sums::masked_gradient>>()});
    });
    v.row_chunks = one_wave_rows(v, M, per_sm * plan.sm_count);
    max_chunks = std::max<int64_t>(max_chunks, v.row_chunks);
  }
  plan.totals_offset = align_up(coefficient_bytes(C) +
                                sizeof(double) * 2 * static_cast<size_t>(max_chunks) * static_cast<size_t>(C));
  plan.workspace_bytes = plan.totals_offset + sizeof(double) * 4 * static_cast<size_t>(C);
  return plan;
}

namespace batchnorm_detail {

namespace {

// Sync-BN: this rank's totals (rank_totals) summed over the ranks, in place, or into the
// global half of the totals when the rank's own are still needed (the backward's dγ, dβ).
// Returns where the global totals are.
double* sum_over_ranks(const ChannelReductionPlan& plan, int64_t chunks, const double* partial, void* workspace,
                       const RankSum& over_ranks, cudaStream_t stream, bool keep_local) {
  double* local = rank_totals(workspace, plan);
  rank_totals_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.C, chunks, partial, local);
  check_launch("batchnorm rank_totals_kernel");
  double* global = keep_local ? local + 2 * plan.C : local;
  over_ranks.sum(local, global, 2 * static_cast<size_t>(plan.C), stream);
  return global;
}

}  // namespace

void launch_train_statistics(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                             bool vectors, void* workspace, cudaStream_t stream, const RankSum* over_ranks) {
  double* partial = partial_sums(workspace, plan);
  const ChannelTiling& t = vectors ? plan.vector : plan.scalar;
  const dim3 grid(t.channel_tiles, t.row_chunks), block(t.tile_x, t.tile_y);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    if (vectors) {
      vector_partial_kernel<T, Sums::moments><<<grid, block, 0, stream>>>(
          plan.M, plan.C, x, nullptr, nullptr, MaskSource<T>{}, PooledDy<T>{}, ChannelTensor{}, nullptr, partial);
      check_launch("batchnorm vector_partial_kernel (moments)");
    } else {
      moments_partial_kernel<T><<<grid, block, 0, stream>>>(plan.M, plan.C, t.rows_per_chunk, x, partial);
      check_launch("batchnorm moments_partial_kernel");
    }
  });
  if (!over_ranks) {
    train_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M, plan.C, t.row_chunks, partial,
                                                                                args, coefficients(workspace));
    check_launch("batchnorm train_finalize_kernel");
    return;
  }
  double* totals = sum_over_ranks(plan, t.row_chunks, partial, workspace, *over_ranks, stream, false);
  train_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M * over_ranks->ranks, plan.C, 1,
                                                                              totals, args, coefficients(workspace));
  check_launch("batchnorm train_finalize_kernel (sync-BN)");
}

void launch_backward_statistics(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                                bool vectors, void* workspace, cudaStream_t stream, const RankSum* over_ranks) {
  double* partial = partial_sums(workspace, plan);
  const ChannelTiling& t = vectors ? plan.vector : plan.scalar;
  const dim3 grid(t.channel_tiles, t.row_chunks), block(t.tile_x, t.tile_y);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const BackwardInputs<T> in = backward_inputs<T>(args, plan.C);
    T* dz_out = static_cast<T*>(args.dresidual);
    if (vectors) {
      auto launch = [&](auto kernel, MaskSource<T> mask) {
        kernel<<<grid, block, 0, stream>>>(plan.M, plan.C, in.x, in.dy, in.dy_other, mask, in.pooled, args.saved_mean,
                                           dz_out, partial);
      };
      if (in.masked() && in.pooled.any())
        launch(vector_partial_kernel<T, Sums::masked_gradient, true>, in.mask);
      else if (in.masked())
        launch(vector_partial_kernel<T, Sums::masked_gradient>, in.mask);
      else if (in.pooled.any())
        launch(vector_partial_kernel<T, Sums::gradient, true>, MaskSource<T>{});
      else
        launch(vector_partial_kernel<T, Sums::gradient>, MaskSource<T>{});
      check_launch("batchnorm vector_partial_kernel (gradient)");
    } else {
      gradient_partial_kernel<T><<<grid, block, 0, stream>>>(plan.M, plan.C, t.rows_per_chunk, in.x, in.dy, in.dy_other,
                                                             in.mask, in.pooled, args.saved_mean, dz_out, partial);
      check_launch("batchnorm gradient_partial_kernel");
    }
  });
  if (!over_ranks) {
    backward_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(
        plan.M, plan.C, t.row_chunks, partial, nullptr, args, coefficients(workspace));
    check_launch("batchnorm backward_finalize_kernel");
    return;
  }
  const double* global = sum_over_ranks(plan, t.row_chunks, partial, workspace, *over_ranks, stream, true);
  backward_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(
      plan.M * over_ranks->ranks, plan.C, 1, rank_totals(workspace, plan), global, args, coefficients(workspace));
  check_launch("batchnorm backward_finalize_kernel (sync-BN)");
}

}  // namespace batchnorm_detail

}  // namespace trident::cuda::device
