// Host launchers of device/activation.cu: the point-wise activations of ops/activation_math.h
// and their backward, and the two halves of squeeze-excitation's gate: a mul by one value per
// sample and channel, and the gradient of such a broadcast operand (Σ a·dy per sample and
// channel, or per channel). Each enqueues on `stream`, checks the launch, and does nothing for
// zero elements.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"
#include "ops/activation_math.h"

namespace trident::cuda::device {

void launch_activation(ElemType t, const ops::ActivationParams& p, const void* x, void* y, int64_t n,
                       cudaStream_t stream);
void launch_activation_backward(ElemType t, const ops::ActivationParams& p, const void* x, const void* dy, void* dx,
                                int64_t n, cudaStream_t stream);
// y[r, k] = a[r, k]·b[r / rows_per_sample, k] over rows × channels.
void launch_mul_per_sample(ElemType t, const void* a, const void* b, void* y, int64_t rows, int64_t channels,
                           int64_t rows_per_sample, cudaStream_t stream);
// db[s, k] = Σ over the rows of group s of a·dy, for `groups` groups of rows / groups rows.
void launch_mul_reduce(ElemType t, const void* a, const void* dy, void* db, int64_t rows, int64_t channels,
                       int64_t groups, cudaStream_t stream);

}  // namespace trident::cuda::device
