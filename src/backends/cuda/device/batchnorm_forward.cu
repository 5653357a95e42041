// Phase 3 of the batchnorm forward: y = x·scale + shift per channel, with the coefficients the
// training statistics wrote (batchnorm_statistics.cu) or, in inference, from the running
// statistics in the same kernel (no workspace). Per-channel constants sit in registers; the
// vector path moves 16-byte vectors of channels, the scalar path one channel per thread.
#include "backends/cuda/device/batchnorm_detail.cuh"

namespace trident::cuda::device {

using namespace batchnorm_detail;

namespace {

// Scale and shift of channel c: from the finalize kernel (training) or from the running
// statistics (coef == nullptr, inference).
__device__ __forceinline__ void affine_coefficients(const float* coef, const BatchNormInferArgs& infer, int64_t C,
                                                    int64_t c, float& scale, float& shift) {
  if (coef) {
    scale = coef[c];
    shift = coef[C + c];
  } else {
    const double invstd = 1.0 / sqrt(static_cast<double>(load(infer.running_var, c)) + infer.eps);
    const double gamma = load(infer.gamma, c);
    scale = static_cast<float>(invstd * gamma);
    shift = static_cast<float>(load(infer.beta, c) - load(infer.running_mean, c) * invstd * gamma);
  }
}

// y = x·scale[c] + shift[c] (scalar path). x and y may be the same memory.
template <class T>
__global__ void affine_apply_kernel(int64_t M, int64_t C, const T* x, T* y, const float* __restrict__ coef,
                                    BatchNormInferArgs infer) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float scale, shift;
  affine_coefficients(coef, infer, C, c, scale, shift);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    y[i] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[i]), scale), shift));
  }
}

// Vector path of affine_apply_kernel. A thread loads kRows vectors before storing any; x and
// y are either the same memory or disjoint, and each element is read before it is written
// by the thread that owns it, so in-place application stays correct.
template <class T>
__global__ void __launch_bounds__(kThreads) vector_affine_apply_kernel(int64_t M, int64_t C, const T* x, T* y,
                                                                       const float* __restrict__ coef,
                                                                       BatchNormInferArgs infer) {
  constexpr int N = kWidth<T>, kRows = 4;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= C) return;
  float scale[N], shift[N];
#pragma unroll
  for (int j = 0; j < N; ++j) affine_coefficients(coef, infer, C, c0 + j, scale[j], shift[j]);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
    uint4 in[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (m + r * step < M) in[r] = load_vector(x + (m + r * step) * C + c0);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step >= M) break;
      float v[N];
      to_floats<T>(in[r], v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = __fadd_rn(__fmul_rn(v[j], scale[j]), shift[j]);
      store_vector(y + (m + r * step) * C + c0, from_floats<T>(v));
    }
  }
}

// Phase 3 over x → y: coefficients from `coef` (training), or from `infer`'s running
// statistics when coef is null; the vector path when `vec` (use_vectors over x and y).
void launch_affine_apply(ElemType act, const ChannelReductionPlan& plan, bool vec, const void* x, void* y,
                         const float* coef, const BatchNormInferArgs& infer, cudaStream_t stream) {
  const char* suffix = coef ? "" : " (inference)";
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (vec) {
      const ChannelTiling& t = plan.vector;
      constexpr auto apply = vector_affine_apply_kernel<T>;
      const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<apply>() * plan.sm_count);
      apply<<<dim3(t.channel_tiles, rows), dim3(t.tile_x, t.tile_y), 0, stream>>>(plan.M, plan.C, xt, yt, coef,
                                                                                 infer);
      check_launch(std::string("batchnorm vector_affine_apply_kernel") + suffix);
      return;
    }
    const ChannelTiling& t = plan.scalar;
    affine_apply_kernel<T><<<apply_grid(plan), dim3(t.tile_x, t.tile_y), 0, stream>>>(plan.M, plan.C, xt, yt, coef,
                                                                                      infer);
    check_launch(std::string("batchnorm affine_apply_kernel") + suffix);
  });
}

}  // namespace

void launch_batchnorm_train(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                            void* workspace, cudaStream_t stream, const RankSum* over_ranks) {
  if (plan.C <= 0) return;
  if (plan.M < 2) throw Error("batchnorm training needs more than one value per channel");
  const bool vec = use_vectors(plan, {args.x, args.y});
  launch_train_statistics(act, plan, args, vec, workspace, stream, over_ranks);
  launch_affine_apply(act, plan, vec, args.x, args.y, coefficients(workspace), BatchNormInferArgs{}, stream);
}

void launch_batchnorm_infer(ElemType act, const ChannelReductionPlan& plan, const BatchNormInferArgs& args,
                            cudaStream_t stream) {
  if (plan.C <= 0 || plan.M <= 0) return;
  launch_affine_apply(act, plan, use_vectors(plan, {args.x, args.y}), args.x, args.y, nullptr, args, stream);
}

}  // namespace trident::cuda::device
