// Phase 3 of the batchnorm backward: dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M) per
// element with the coefficients batchnorm_statistics.cu wrote, dz being dy [+ dy_other] masked
// by the relu for batchnorm_relu_backward. Where the op also returns dresidual (= dz, cbar),
// phase 1 already stored it, and this pass reads dz from there instead of dy, dy_other and
// the mask again: 3 full-size reads and 2 writes become 2 reads and 1 write, and the whole
// backward of a block end 7 passes over the tensor instead of 8. Where dy is a max pooling's
// gradient under tiling windows (fold_maxpool_gradient), the apply walks the windows instead of
// the rows (pooled_backward_apply_kernel).
#include "backends/cuda/device/batchnorm_detail.cuh"

namespace trident::cuda::device {

using namespace batchnorm_detail;

namespace {

// dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M) (scalar path); dz from `dz_in` where
// phase 1 stored it, else from dy, dy_other and the mask. Every element is read before it is
// written by the same thread, so dx may alias x or dy.
template <class T>
__global__ void backward_apply_kernel(int64_t M, int64_t C, const T* x, const T* dy, const T* dy_other,
                                      MaskSource<T> mask, PooledDy<T> pooled, const T* dz_in, T* dx,
                                      const float* __restrict__ coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float g = coef[c], db = coef[C + c], k = coef[2 * C + c], mean = coef[3 * C + c];
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    const float xf = to_float(x[i]);
    float dz;
    if (dz_in) {
      dz = to_float(dz_in[i]);
    } else {
      dz = pooled.any() ? pooled.at(dy, m, c) : to_float(dy[i]);
      if (dy_other) dz = gradient_sum<T>(dz, to_float(dy_other[i]));
      if (mask.any() && !mask.on(m, c, i, xf)) dz = 0.f;
    }
    const float centred = __fsub_rn(xf, mean);
    dx[i] = from_float<T>(__fmul_rn(g, __fsub_rn(__fsub_rn(dz, db), __fmul_rn(centred, k))));
  }
}

// The apply's four coefficients of N consecutive channels (batchnorm_statistics.cu's layout:
// γ·invstd, dβ/M, invstd·dγ/M, mean), held in registers, and dx from them.
template <int N>
struct ApplyCoefficients {
  float g[N], db[N], k[N], mean[N];
  __device__ __forceinline__ void load(const float* __restrict__ coef, int64_t C, int64_t c0) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      g[j] = coef[c0 + j];
      db[j] = coef[C + c0 + j];
      k[j] = coef[2 * C + c0 + j];
      mean[j] = coef[3 * C + c0 + j];
    }
  }
  __device__ __forceinline__ void dx(const float (&x)[N], const float (&dz)[N], float (&out)[N]) const {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float centred = __fsub_rn(x[j], mean[j]);
      out[j] = __fmul_rn(g[j], __fsub_rn(__fsub_rn(dz[j], db[j]), __fmul_rn(centred, k[j])));
    }
  }
};

// Where the vector apply takes dz from.
enum class Dz { dy, masked_dy, stored };

// Vector path of backward_apply_kernel; the same load-before-store rule as
// vector_affine_apply_kernel keeps an aliasing dx correct. Three blocks a multiprocessor;
// the masked form, which also holds the mask's affine, keeps one row in flight to fit.
template <class T, Dz Source>
__global__ void __launch_bounds__(kThreads, 3) vector_backward_apply_kernel(int64_t M, int64_t C, const T* x,
                                                                         const T* dy, const T* dy_other,
                                                                         MaskSource<T> mask, T* dx,
                                                                         const float* __restrict__ coef) {
  constexpr bool Masked = Source == Dz::masked_dy;
  constexpr int N = kWidth<T>, kRows = Source == Dz::masked_dy ? 1 : 2;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= C) return;
  ApplyCoefficients<N> apply;
  apply.load(coef, C, c0);
  VectorAffine<T> affine;
  if constexpr (Masked) affine.load(mask, c0);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
    uint4 xv[kRows], dv[kRows], ov[kRows], yv[kRows];
    unsigned bv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step < M) {
        const int64_t i = (m + r * step) * C + c0;
        xv[r] = load_vector(x + i);
        dv[r] = load_vector(dy + i);  // dz itself when Source is stored
        if (Source != Dz::stored && dy_other) ov[r] = load_vector(dy_other + i);
        if constexpr (Masked) {
          if (mask.bits) bv[r] = mask.byte_from(m + r * step, c0);
          else if (mask.y) yv[r] = load_vector(mask.y + i);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step >= M) break;
      const int64_t i = (m + r * step) * C + c0;
      float xf[N], dz[N], out[N];
      to_floats<T>(xv[r], xf);
      to_floats<T>(dv[r], dz);
      if (Source != Dz::stored && dy_other) add_gradient<T>(ov[r], dz);
      if constexpr (Masked) mask_gradient<T>(mask, yv[r], bv[r], xf, affine, dz);
      apply.dx(xf, dz, out);
      store_vector(dx + i, from_floats<T>(out));
    }
  }
}

// One wave of the vector apply (dy is dz itself when Source is stored).
template <class T, Dz Source>
void launch_vector_apply(const ChannelReductionPlan& plan, const T* x, const T* dy, const T* dy_other,
                         MaskSource<T> mask, T* dx, const float* coef, cudaStream_t stream) {
  constexpr auto kernel = vector_backward_apply_kernel<T, Source>;
  const ChannelTiling& t = plan.vector;
  const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<kernel>() * plan.sm_count);
  kernel<<<dim3(t.channel_tiles, rows), dim3(t.tile_x, t.tile_y), 0, stream>>>(plan.M, plan.C, x, dy, dy_other, mask,
                                                                                dx, coef);
}

// The vector apply of a pooled dy under tiling windows (PooledDy::tiled), walked by window
// instead of by row: a thread takes one block of R×S cells — a window, or a block past the last
// window, whose cells no window covers — and one channel vector, so the window's gradient and
// index are loaded once and the block's rows of x are in flight together (KR × KS > 0: the
// extents at compile time, VGG's 2×2). The element math is vector_backward_apply_kernel's, so
// dx has the same bits; elements are independent, so the walk's order does not matter.
template <class T, bool Masked, int KR, int KS>
__global__ void __launch_bounds__(kThreads, 2) pooled_backward_apply_kernel(int64_t C, const T* x, const T* dy,
                                                                          MaskSource<T> mask, PooledDy<T> pooled,
                                                                          T* dx, const float* __restrict__ coef) {
  constexpr int N = kWidth<T>;
  const TiledWindows& t = pooled.tiled;
  const int R = KR > 0 ? KR : static_cast<int>(t.R), S = KS > 0 ? KS : static_cast<int>(t.S);
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= C) return;
  ApplyCoefficients<N> apply;
  apply.load(coef, C, c0);
  VectorAffine<T> affine;
  if constexpr (Masked) affine.load(mask, c0);
  // Blocks of cells per sample: ceil(H / R) × ceil(W / S).
  const uint32_t block_rows = (t.H + R - 1) / R, block_cols = (t.W + S - 1) / S;
  const uint32_t blocks = static_cast<uint32_t>(pooled.window.N) * block_rows * block_cols;
  const uint32_t C32 = static_cast<uint32_t>(C);
  for (uint32_t b = blockIdx.y * blockDim.y + threadIdx.y; b < blocks; b += gridDim.y * blockDim.y) {
    const uint32_t nb = b / block_cols, bq = b - nb * block_cols;
    const uint32_t n = nb / block_rows, bp = nb - n * block_rows;
    const bool covered = bp < t.P && bq < t.Q;
    ElemPack<unsigned char, N> at;
    ElemPack<T, N> d;
    if (covered) {
      const uint32_t o = ((n * t.P + bp) * t.Q + bq) * C32 + static_cast<uint32_t>(c0);
      at = load_pack<N>(pooled.index + o);
      d = load_pack<N>(dy + o);
    }
    // Fixed extents: every x of the block loaded before any dx is stored (dx may alias x; each
    // cell is still read before its own store).
    constexpr int kCells = KR > 0 ? KR * KS : 1;
    uint4 xs[kCells];
    if constexpr (KR > 0) {
#pragma unroll
      for (int r = 0; r < KR; ++r)
#pragma unroll
        for (int q = 0; q < KS; ++q) {
          const uint32_t h = bp * KR + r, w = bq * KS + q;
          if (h < t.H && w < t.W) xs[r * KS + q] = load_vector(x + (static_cast<int64_t>(n * t.H + h) * t.W + w) * C + c0);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t h = bp * R + r;
      if (h >= t.H) break;
#pragma unroll
      for (int q = 0; q < S; ++q) {
        const uint32_t w = bq * S + q;
        if (w >= t.W) break;
        const int64_t m = static_cast<int64_t>(n * t.H + h) * t.W + w, i = m * C + c0;
        const uint4 xv = KR > 0 ? xs[r * S + q] : load_vector(x + i);
        uint4 yv{};
        unsigned bits = 0;
        if constexpr (Masked) {
          if (mask.bits) bits = mask.byte_from(m, c0);
          else if (mask.y) yv = load_vector(mask.y + i);
        }
        const unsigned cell = static_cast<unsigned>(r * S + q);
        float xf[N], dz[N], out[N];
        to_floats<T>(xv, xf);
#pragma unroll
        for (int j = 0; j < N; ++j) {
          dz[j] = 0.f;
          if (covered && at.v[j] == cell) dz[j] = to_float(from_float<T>(__fadd_rn(0.f, to_float(d.v[j]))));
        }
        if constexpr (Masked) mask_gradient<T>(mask, yv, bits, xf, affine, dz);
        apply.dx(xf, dz, out);
        store_vector(dx + i, from_floats<T>(out));
      }
    }
  }
}

template <class T, bool Masked>
void launch_pooled_apply(const ChannelReductionPlan& plan, const BackwardInputs<T>& in, T* dx, const float* coef,
                         cudaStream_t stream) {
  const ChannelTiling& t = plan.vector;
  const TiledWindows& w = in.pooled.tiled;
  const int64_t blocks = in.pooled.window.N * ((w.H + w.R - 1) / w.R) * ((w.W + w.S - 1) / w.S);
  const int64_t rows = std::min<int64_t>(ceil_div(blocks, t.tile_y), std::min<int64_t>(kMaxGridY, 2 * 132 * 8));
  const dim3 grid(t.channel_tiles, static_cast<unsigned>(std::max<int64_t>(rows, 1))), block(t.tile_x, t.tile_y);
  if (w.R == 2 && w.S == 2)
    pooled_backward_apply_kernel<T, Masked, 2, 2><<<grid, block, 0, stream>>>(plan.C, in.x, in.dy, in.mask, in.pooled,
                                                                             dx, coef);
  else
    pooled_backward_apply_kernel<T, Masked, 0, 0><<<grid, block, 0, stream>>>(plan.C, in.x, in.dy, in.mask, in.pooled,
                                                                             dx, coef);
}

}  // namespace

void launch_batchnorm_backward(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                               void* workspace, cudaStream_t stream, const RankSum* over_ranks) {
  if (plan.C <= 0) return;
  if (args.dy_window_index && args.dy_other) throw Error("a pooled gradient cannot be added to a second one");
  // A pooled dy takes the vector path under tiling windows only (PooledDy).
  const bool vec = use_vectors(plan, {args.x, args.dy, args.dy_other, args.relu_output, args.dx, args.dresidual,
                                      args.dy_window_index}) &&
                   (!args.dy_window_index || TiledWindows(args.dy_window).fits);
  launch_backward_statistics(act, plan, args, vec, workspace, stream, over_ranks);
  if (plan.M <= 0) return;
  const float* coef = coefficients(workspace);
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const BackwardInputs<T> in = backward_inputs<T>(args, plan.C);
    T* dx = static_cast<T*>(args.dx);
    const T* dz = static_cast<const T*>(args.dresidual);  // stored by phase 1 when asked for
    if (vec) {
      if (dz)
        launch_vector_apply<T, Dz::stored>(plan, in.x, dz, nullptr, MaskSource<T>{}, dx, coef, stream);
      else if (in.masked() && in.pooled.any())
        launch_pooled_apply<T, true>(plan, in, dx, coef, stream);
      else if (in.masked())
        launch_vector_apply<T, Dz::masked_dy>(plan, in.x, in.dy, in.dy_other, in.mask, dx, coef, stream);
      else if (in.pooled.any())
        launch_pooled_apply<T, false>(plan, in, dx, coef, stream);
      else
        launch_vector_apply<T, Dz::dy>(plan, in.x, in.dy, in.dy_other, MaskSource<T>{}, dx, coef, stream);
      check_launch("batchnorm vector_backward_apply_kernel");
      return;
    }
    const ChannelTiling& t = plan.scalar;
    backward_apply_kernel<T><<<apply_grid(plan), dim3(t.tile_x, t.tile_y), 0, stream>>>(
        plan.M, plan.C, in.x, in.dy, in.dy_other, in.mask, in.pooled, dz, dx, coef);
    check_launch("batchnorm backward_apply_kernel");
  });
}

}  // namespace trident::cuda::device
