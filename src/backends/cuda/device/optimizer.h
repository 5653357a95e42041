// Host launchers of the optimizer kernels (device/optimizer.cu), f32 parameters and state with
// f32, f16 or bf16 gradients: SGD and AdamW over
// the same tensor description, and the loss-scaling pieces both share. The learning rate (and
// AdamW's step count) are [1] tensors read on the GPU. Two forms: one flat loop when every
// parameter, gradient and state tensor lies end to end in its buffer (the flat-buffer layout),
// else one launch over a device table of tensors, cut into fixed chunks that blocks take in turn.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// Dynamic loss scaling (both null without it): gradients are divided by *loss_scale, and the
// step is skipped (outputs keep the inputs' values) when *found_nonfinite is set.
struct LossScaleView {
  const float* loss_scale = nullptr;
  const int* found_nonfinite = nullptr;
};

struct SgdHyper {
  float momentum = 0, weight_decay = 0;
  bool nesterov = false;
  LossScaleView scaling;
};

// torch.optim.AdamW's settings in double, as the reference backend derives the step's f32
// scalars from them; `step` is the step count before this step (device, one f32).
struct AdamwHyper {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  const float* step = nullptr;
  LossScaleView scaling;
};

// One parameter tensor's pointers (outputs usually equal the inputs: an in-place update). The
// optimizer state: SGD's momentum in state[0]; AdamW's first and second moments in state[0],
// state[1].
struct OptimizerTensor {
  const float* param;
  const void* grad;  // f32, or f16/bf16 (fold_gradient_cast), widened as it is loaded
  ElemType grad_type;
  const float* state[2];
  float* param_out;
  float* state_out[2];
  int64_t numel;
  int64_t first_chunk;  // index of its first chunk among all tensors' chunks
};
inline constexpr int64_t kOptimizerChunk = 4096;  // elements per chunk of the table form

// Loss scaling, before the step: *flag = 1 when any gradient element is inf or NaN (the flag
// is zeroed first). The two forms match the optimizers' launchers.
void launch_find_nonfinite_flat(const OptimizerTensor& all, int* flag, cudaStream_t stream);
void launch_find_nonfinite_table(const OptimizerTensor* table, int count, int64_t total_chunks, int* flag,
                                 cudaStream_t stream);
// After the step: halve the scale (not below 1) and reset the good-step count on overflow;
// otherwise count the step and double the scale every `growth_interval` good steps.
void launch_update_loss_scale(const int* flag, const float* scale_in, const float* good_in, float* scale_out,
                              float* good_out, int64_t growth_interval, cudaStream_t stream);

void launch_sgd_flat(const float* lr, const OptimizerTensor& all, const SgdHyper& h, cudaStream_t stream);
// `table` is device memory holding `count` entries; total_chunks = Σ ceil(numel / kOptimizerChunk).
void launch_sgd_table(const float* lr, const OptimizerTensor* table, int count, int64_t total_chunks,
                      const SgdHyper& h, cudaStream_t stream);

void launch_adamw_flat(const float* lr, const OptimizerTensor& all, const AdamwHyper& h, cudaStream_t stream);
void launch_adamw_table(const float* lr, const OptimizerTensor* table, int count, int64_t total_chunks,
                        const AdamwHyper& h, cudaStream_t stream);
// After an AdamW step (which read the old count): *step_out = *step_in + 1, or *step_in where
// `flag` (may be null) says the step was skipped.
void launch_advance_step(const int* flag, const float* step_in, float* step_out, cudaStream_t stream);

}  // namespace trident::cuda::device
