// Host launchers of the hand-written kernels around the cuDNN convolutions: the per-channel
// epilogue (bias or BN scale/shift, residual, relu) used where cuDNN cannot fuse it and by the
// cbr apply step, deterministic per-channel sums (the conv bias gradient and the statistics of
// cbr when genstats is refused), and the cbr finalize step. Plain C++: included by the kernel
// classes (.cpp) and the device code (.cu). Every launcher enqueues on `stream` and checks the
// launch; none allocates or synchronises.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// y[r,c] = relu?(x[r,c]·scale[c] + shift[c] + residual[r,c]) over `rows` rows of `channels`
// (the relu clipped at relu_max when that is positive)
// contiguous values (NHWC), in f32 arithmetic. x, residual and y share the storage type `io`;
// scale is f32 (nullptr: 1); shift is f32 or `io` (nullptr: 0); residual may be nullptr. y may
// be x or residual (each element is read before it is written). 16-byte loads when channels
// and pointers allow it.
struct ChannelAffineArgs {
  ElemType io = ElemType::f32;
  const void* x = nullptr;
  const float* scale = nullptr;
  const void* shift = nullptr;
  ElemType shift_type = ElemType::f32;
  const void* residual = nullptr;
  // Or null: the residual goes through this affine [2, channels] (scale, shift) before the add.
  const float* residual_affine = nullptr;
  void* y = nullptr;
  int64_t rows = 0, channels = 0;
  bool relu = false;
  float relu_max = 0.f;  // > 0: the relu clips there too (ReLU6)
  // With relu: also the packed mask of y > 0 (core/relu_mask.h), mask_row_bytes a row, padding
  // bits zeroed; channels must then be a multiple of 8 (one thread writes a whole byte).
  void* mask = nullptr;
  int64_t mask_row_bytes = 0;
  int sm_count = 132;  // the GPU's multiprocessors: the masked vector path launches one wave
};
void launch_channel_affine(const ChannelAffineArgs& a, cudaStream_t stream);

// Per-channel Σx (and Σx² when sq_sum is set) of an [rows, channels] tensor, in a fixed order
// (two passes, no atomics), so the result is bitwise the same on every run. `partials` is
// scratch of channel_sums_scratch_bytes(rows, channels) bytes.
// Row blocks of the first pass: one per 1024 rows, at most 1024 (a few waves on an H200).
inline int64_t channel_sum_row_blocks(int64_t rows) {
  return std::clamp<int64_t>((rows + 1023) / 1024, 1, 1024);
}
inline size_t channel_sums_scratch_bytes(int64_t rows, int64_t channels) {
  return static_cast<size_t>(2 * channel_sum_row_blocks(rows) * channels) * sizeof(float);
}
void launch_channel_sums(ElemType t, const void* x, int64_t rows, int64_t channels, float* partials, float* sum,
                         float* sq_sum, cudaStream_t stream);
// The second pass alone, for other kernels that leave partial sums in the same layout
// (partials[b·channels + c], then the squares at [(blocks + b)·channels + c]; sq_sum null: no squares).
void launch_combine_channel_partials(const float* partials, int64_t blocks, int64_t channels, float* sum,
                                     float* sq_sum, cudaStream_t stream);

// dst[c] = src[c] converted to `t` (the conv bias gradient, summed in f32).
void launch_store_channels(const float* src, void* dst, ElemType t, int64_t channels, cudaStream_t stream);

// cbr's batch-norm finalize, one thread per channel, in f64 arithmetic from the f32 sums:
// mean = Σ/M, var = Σ²/M − mean² (biased, clamped at 0), invstd = 1/sqrt(var + eps);
// saved_mean, saved_invstd; running_mean ← (1−m)·running_mean + m·mean and
// running_var ← (1−m)·running_var + m·var·M/(M−1) (in place when in and out are the same);
// scale = gamma·invstd, shift = beta − mean·scale (f32, for launch_channel_affine).
// Every per-channel tensor has its own storage type.
struct TypedChannels {
  void* data = nullptr;
  ElemType type = ElemType::f32;
};
struct BnFinalizeArgs {
  const float* sum = nullptr;
  const float* sq_sum = nullptr;
  int64_t count = 0;  // M = N·P·Q
  int64_t channels = 0;
  double eps = 1e-5, momentum = 0.1;
  TypedChannels gamma, beta, running_mean_in, running_var_in;
  TypedChannels saved_mean, saved_invstd, running_mean_out, running_var_out;
  float* scale = nullptr;
  float* shift = nullptr;
  // Round scale and shift to f16 values (kept in f32): what cuDNN's f16 prologue graphs read,
  // so every reader of a deferred layer's affine applies the same numbers.
  bool affine_in_f16 = false;
  // A cancelled convolution bias (ops/cbr_operands.h), or null: the running mean also takes
  // momentum·b, rounded as the decomposition rounds it (f32 multiply, then f32 add).
  TypedChannels cancelled_bias;
};
void launch_bn_finalize(const BnFinalizeArgs& a, cudaStream_t stream);

}  // namespace trident::cuda::device
