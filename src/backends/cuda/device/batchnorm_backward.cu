// Phase 3 of the batchnorm backward: dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M) per
// element with the coefficients batchnorm_statistics.cu wrote, dz being dy [+ dy_other] masked
// by the relu for batchnorm_relu_backward. Where the op also returns dresidual (= dz, cbar),
// phase 1 already stored it, and this pass reads dz from there instead of dy, dy_other and
// the mask again: 3 full-size reads and 2 writes become 2 reads and 1 write, and the whole
// backward of a block end 7 passes over the tensor instead of 8.
#include "backends/cuda/device/batchnorm_detail.cuh"

namespace trident::cuda::device {

using namespace batchnorm_detail;

namespace {

// dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M) (scalar path); dz from `dz_in` where
// phase 1 stored it, else from dy, dy_other and the mask. Every element is read before it is
// written by the same thread, so dx may alias x or dy.
template <class T>
__global__ void backward_apply_kernel(int64_t M, int64_t C, const T* x, const T* dy, const T* dy_other,
                                      MaskSource<T> mask, const T* dz_in, T* dx, const float* __restrict__ coef) {
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
      dz = to_float(dy[i]);
      if (dy_other) dz = gradient_sum<T>(dz, to_float(dy_other[i]));
      if (mask.any() && !mask.on(m, c, i, xf)) dz = 0.f;
    }
    const float centred = __fsub_rn(xf, mean);
    dx[i] = from_float<T>(__fmul_rn(g, __fsub_rn(__fsub_rn(dz, db), __fmul_rn(centred, k))));
  }
}

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
  float g[N], db[N], k[N], mean[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    g[j] = coef[c0 + j];
    db[j] = coef[C + c0 + j];
    k[j] = coef[2 * C + c0 + j];
    mean[j] = coef[3 * C + c0 + j];
  }
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
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float centred = __fsub_rn(xf[j], mean[j]);
        out[j] = __fmul_rn(g[j], __fsub_rn(__fsub_rn(dz[j], db[j]), __fmul_rn(centred, k[j])));
      }
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

}  // namespace

void launch_batchnorm_backward(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                               void* workspace, cudaStream_t stream, const RankSum* over_ranks) {
  if (plan.C <= 0) return;
  const bool vec = use_vectors(plan, {args.x, args.dy, args.dy_other, args.relu_output, args.dx, args.dresidual});
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
      else if (in.masked())
        launch_vector_apply<T, Dz::masked_dy>(plan, in.x, in.dy, in.dy_other, in.mask, dx, coef, stream);
      else
        launch_vector_apply<T, Dz::dy>(plan, in.x, in.dy, in.dy_other, MaskSource<T>{}, dx, coef, stream);
      check_launch("batchnorm vector_backward_apply_kernel");
      return;
    }
    const ChannelTiling& t = plan.scalar;
    backward_apply_kernel<T><<<apply_grid(plan), dim3(t.tile_x, t.tile_y), 0, stream>>>(
        plan.M, plan.C, in.x, in.dy, in.dy_other, in.mask, dz, dx, coef);
    check_launch("batchnorm backward_apply_kernel");
  });
}

}  // namespace trident::cuda::device
