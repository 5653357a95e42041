// Host launchers of the SGD kernels (device/optimizer.cu), f32 only. The learning rate is a
// [1] tensor read on the GPU. Two forms: one flat loop when every parameter, gradient and
// momentum tensor lies end to end in its buffer (the flat-buffer layout), else one launch over
// a device table of tensors, cut into fixed chunks that blocks take in turn.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

struct SgdHyper {
  float momentum = 0, weight_decay = 0;
  bool nesterov = false;
  // Dynamic loss scaling (both null without it): gradients are divided by *loss_scale, and
  // the step is skipped (outputs keep the inputs' values) when *found_nonfinite is set.
  const float* loss_scale = nullptr;
  const int* found_nonfinite = nullptr;
};

// One parameter tensor's pointers (outputs usually equal the inputs: an in-place update).
struct SgdTensor {
  const float* param;
  const float* grad;
  const float* momentum;
  float* param_out;
  float* momentum_out;
  int64_t numel;
  int64_t first_chunk;  // index of its first chunk among all tensors' chunks
};
inline constexpr int64_t kSgdChunk = 4096;  // elements per chunk of the table form

// Loss scaling, before the step: *flag = 1 when any gradient element is inf or NaN (the flag
// is zeroed first). The two forms match the SGD launchers'.
void launch_find_nonfinite_flat(const SgdTensor& all, int* flag, cudaStream_t stream);
void launch_find_nonfinite_table(const SgdTensor* table, int count, int64_t total_chunks, int* flag,
                                 cudaStream_t stream);
// After the step: halve the scale (not below 1) and reset the good-step count on overflow;
// otherwise count the step and double the scale every `growth_interval` good steps.
void launch_update_loss_scale(const int* flag, const float* scale_in, const float* good_in, float* scale_out,
                              float* good_out, int64_t growth_interval, cudaStream_t stream);

void launch_sgd_flat(const float* lr, const SgdTensor& all, const SgdHyper& h, cudaStream_t stream);
// `table` is device memory holding `count` entries; total_chunks = Σ ceil(numel / kSgdChunk).
void launch_sgd_table(const float* lr, const SgdTensor* table, int count, int64_t total_chunks, const SgdHyper& h,
                      cudaStream_t stream);

}  // namespace trident::cuda::device
