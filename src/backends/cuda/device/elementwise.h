// Host launchers of the element-wise kernels (device/elementwise.cu): relu and its backward,
// add, per-channel or same-shape mul, clip, fills by bit pattern, and the interpreter of the
// fused `elementwise` op's programs. Every launcher enqueues on `stream`, checks the launch
// and does nothing for zero elements.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

void launch_relu(ElemType t, const void* x, void* y, int64_t n, cudaStream_t stream);
void launch_relu_backward(ElemType t, const void* y, const void* dy, void* dx, int64_t n, cudaStream_t stream);
void launch_add(ElemType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream);
// y = a·b; `channels` = 0 when b has a's shape, else b is [channels] broadcast over a's last axis.
void launch_mul(ElemType t, const void* a, const void* b, void* y, int64_t n, int64_t channels, cudaStream_t stream);
// y = min(max(x, lo), hi), with ±infinity for a missing bound.
void launch_clip(ElemType t, const void* x, void* y, int64_t n, float lo, float hi, cudaStream_t stream);
// Every element of y set to one bit pattern of 2 or 4 bytes (the value, encoded by the host).
void launch_fill16(void* y, uint16_t bits, int64_t n, cudaStream_t stream);
void launch_fill32(void* y, uint32_t bits, int64_t n, cudaStream_t stream);

// The fused element-wise op: each output runs its program on input 0, steps being relu
// (kRelu) or "add input k" (k ≥ 1). Small enough to pass by value as a kernel argument.
struct ElementwiseProgram {
  static constexpr int kMaxInputs = 16;
  static constexpr int kMaxOutputs = 8;
  static constexpr int kMaxSteps = 48;  // all outputs' steps together
  static constexpr int8_t kRelu = -1;
  const void* inputs[kMaxInputs] = {};
  void* outputs[kMaxOutputs] = {};
  int8_t steps[kMaxSteps] = {};
  int8_t first_step[kMaxOutputs + 1] = {};  // output o runs steps [first_step[o], first_step[o+1])
  int num_outputs = 0;
};
void launch_elementwise_program(ElemType t, const ElementwiseProgram& program, int64_t n, cudaStream_t stream);

}  // namespace trident::cuda::device
