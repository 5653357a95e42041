// Host launchers of the batchnorm kernels over NHWC activations seen as [M = N·H·W, C].
// Per-channel sums use a deterministic two-phase reduction (batchnorm_statistics.cu): blocks
// over (channel tile × row chunk) write f64 partial sums to the workspace, a finalize kernel
// adds them per channel in a fixed order; then an apply kernel walks the activations once more
// (batchnorm_forward.cu, batchnorm_backward.cu; 16-byte vectors of channels when C and the
// pointers allow, one channel per thread else). fold_batchnorm: batchnorm_fold.cu.
// Results are therefore bitwise identical from run to run. Per-channel tensors (parameters,
// statistics, their gradients) may be f32 or the activation's dtype: each carries its type.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backends/cuda/device/launch.h"
#include "backends/cuda/device/pool.h"

namespace trident::cuda::device {

// A per-channel tensor [C] and its storage type.
struct ChannelTensor {
  void* data = nullptr;
  ElemType type = ElemType::f32;
};

// One way of splitting [M, C] over blocks of tile_x × tile_y (= 256) threads, each thread
// owning `vector` consecutive channels (1 on the scalar path, a 16-byte vector otherwise).
struct ChannelTiling {
  unsigned vector = 1;                         // channels per thread; 1 also means "no vector path"
  unsigned tile_x = 32, tile_y = 8;            // block shape: thread columns × rows
  unsigned channel_tiles = 1, row_chunks = 1;  // grid of the partial-sum kernel
  int64_t rows_per_chunk = 0;                  // scalar path: contiguous rows per chunk
};

// How the [M, C] reduction is split; made once per node by plan_channel_reduction. A launch
// takes the vector tiling when the plan has one and its activation pointers are 16-byte
// aligned, the scalar tiling otherwise; the workspace fits either.
struct ChannelReductionPlan {
  int64_t M = 0, C = 0;
  int sm_count = 132;
  ChannelTiling scalar, vector;
  size_t workspace_bytes = 0;  // four f32 coefficients per channel, the partial sums, the totals
  size_t totals_offset = 0;    // where the [2][C] f64 totals of a sync-BN sit (local, then global)
};
ChannelReductionPlan plan_channel_reduction(int64_t M, int64_t C, ElemType act, int sm_count);

// Sync-BN, a batchnorm whose batch spans several ranks (each of them M rows): the launcher
// reduces its partial sums to per-channel totals [2][C] f64 in the workspace and hands them to
// `sum`, which enqueues on `stream` their element-wise sum over the ranks into `out` (`out` may
// be `in`); the finalize then divides by M·ranks. The device layer knows no collective library:
// the kernel class passes one in. The forward sums Σx, Σx²; the backward Σdz, Σdz·(x − mean),
// with dγ and dβ kept the rank's own (the gradient all-reduce averages them, as for any weight).
struct RankSum {
  std::function<void(const double* in, double* out, size_t count, cudaStream_t stream)> sum;
  int64_t ranks = 1;
};

// Training forward: batch mean and biased variance, saved_mean / saved_invstd, running
// statistics updated in place with `momentum` (unbiased variance), then y = x̂·γ + β.
struct BatchNormTrainArgs {
  const void* x = nullptr;
  void* y = nullptr;
  ChannelTensor gamma, beta, running_mean, running_var;  // inputs
  ChannelTensor saved_mean, saved_invstd, running_mean_out, running_var_out;
  double eps = 1e-5, momentum = 0.1;
};
void launch_batchnorm_train(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                            void* workspace, cudaStream_t stream, const RankSum* over_ranks = nullptr);

// Inference forward from the running statistics: one kernel, no workspace.
struct BatchNormInferArgs {
  const void* x = nullptr;
  void* y = nullptr;
  ChannelTensor gamma, beta, running_mean, running_var;
  double eps = 1e-5;
};
void launch_batchnorm_infer(ElemType act, const ChannelReductionPlan& plan, const BatchNormInferArgs& args,
                            cudaStream_t stream);

// Training backward. With relu_output or relu_bits set (batchnorm_relu_backward) the incoming
// gradient is first masked, dz = dy·(y > 0), and written to dresidual when that is set as
// well (by the statistics pass, so the apply reads dz back instead of dy, dy_other and the
// mask; dresidual must therefore not alias x). With dy_other set the incoming gradient is
// dy + dy_other, rounded to the activation dtype. With dy_window_index set, dy is instead the
// gradient of a max pooling of the relu output ([N,P,Q,C], pooled by dy_window from the
// [N,H,W,C] of x) and the incoming gradient of each cell is gathered from it through the
// pooling's window index, as maxpool2d_index_backward would have written it (pool_gather.cuh;
// passes/fold_maxpool_gradient.cpp); dy_other must then be null.
struct BatchNormBackwardArgs {
  const void* x = nullptr;            // the batchnorm's input (conv_out for the fused op)
  const void* dy = nullptr;
  const void* dy_other = nullptr;     // or null
  const void* dy_window_index = nullptr;  // a pooled dy's window index (core/window_index.h), or null
  PoolGeometry dy_window;                 // with it: how x's cells pool into dy
  const void* relu_output = nullptr;  // y of the fused op, or null
  const void* relu_bits = nullptr;    // or its packed mask (core/relu_mask.h), or null
  int64_t relu_bits_row_bytes = 0;    // bytes of one row of the packed mask
  const float* relu_affine = nullptr; // or the affine [2, C] that recomputes y from x, or null
  float relu_max = 0.f;               // > 0 (with relu_output): a clipped relu, masked by 0 < y < relu_max
  void* dx = nullptr;
  void* dresidual = nullptr;          // or null
  ChannelTensor gamma, saved_mean, saved_invstd, dgamma, dbeta;
};
void launch_batchnorm_backward(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                               void* workspace, cudaStream_t stream, const RankSum* over_ranks = nullptr);

// fold_batchnorm: w [K, per_k] → w·γ/√(σ²+ε) per row k, b' = (b − μ)·γ/√(σ²+ε) + β.
struct FoldBatchNormArgs {
  const void* w = nullptr;
  void* w_folded = nullptr;
  ElemType w_type = ElemType::f32;
  int64_t K = 0, per_k = 0;
  ChannelTensor gamma, beta, mean, var, bias /* data null when absent */, b_folded;
  double eps = 1e-5;
};
void launch_fold_batchnorm(const FoldBatchNormArgs& args, cudaStream_t stream);

}  // namespace trident::cuda::device
