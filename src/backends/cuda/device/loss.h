// Host launchers of the softmax cross-entropy kernels (device/loss.cu): logits [N,K] in
// f32/f16/bf16, i32 labels, computed in f32 with a max-shifted log-sum-exp per row. The batch
// mean adds the per-row losses in a fixed order in one block, so the loss is deterministic.
// A label outside [0, K) makes its row's loss and gradient NaN (the host cannot check labels
// that live on the GPU without a synchronisation).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// Workspace bytes the forward needs for N rows.
size_t softmax_cross_entropy_workspace(int64_t N);

// `smoothing` ε: the target is (1 − ε)·onehot(label) + ε/K.
void launch_softmax_cross_entropy(ElemType logits_type, const void* logits, const int32_t* labels, int64_t N, int64_t K,
                                  float smoothing, void* loss, ElemType loss_type, void* workspace, cudaStream_t stream);

// dlogits = (softmax(logits) − (1 − ε)·onehot(label) − ε/K)·dloss/N, dloss read on the GPU.
void launch_softmax_cross_entropy_backward(ElemType logits_type, const void* logits, const int32_t* labels, int64_t N,
                                           int64_t K, float smoothing, const void* dloss, ElemType dloss_type,
                                           void* dlogits, cudaStream_t stream);

}  // namespace trident::cuda::device
