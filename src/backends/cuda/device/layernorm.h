// Host launchers of device/layernorm.cu: layernorm over the last axis (rows × channels, the
// activation in f32, f16 or bf16; gamma, beta and their gradients in `param`, f32 under mixed
// precision) and its backward. The backward's
// parameter gradients are summed in a fixed order (per chunk of rows, then the chunks in order)
// so that they are the same bits on every run.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

struct LayerNormArgs {
  const void* x = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;  // forward only
  ElemType param = ElemType::f32;  // of gamma, beta, dgamma and dbeta
  void* y = nullptr;            // forward: the output
  const void* dy = nullptr;     // backward: the gradient of y
  void* dx = nullptr;
  void* dgamma = nullptr;
  void* dbeta = nullptr;
  int64_t rows = 0, channels = 0;
  float eps = 1e-5f;
};

void launch_layernorm(ElemType t, const LayerNormArgs& a, cudaStream_t stream);
// Workspace bytes launch_layernorm_backward needs for `rows` × `channels`.
size_t layernorm_backward_workspace(int64_t rows, int64_t channels);
void launch_layernorm_backward(ElemType t, const LayerNormArgs& a, void* workspace, cudaStream_t stream);

}  // namespace trident::cuda::device
