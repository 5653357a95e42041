// A convolution's input prologue (defer_bn_apply) on the GPU: relu(x·scale + shift) either
// inside the convolution's cuDNN graph (ConvBNfprop, ConvBNwgrad) or, where cuDNN refuses
// it or is slower, made by the channel-affine kernel in scratch first. Shared by the fused
// forward (fused_cbr_kernels.cpp) and the weight gradient (conv_kernels.cpp), which choose between
// the two by timing.
#pragma once
#include <array>
#include <cstddef>
#include <functional>

#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"

namespace trident::cuda {

// Bytes of the convolution's input x (and of its activated copy).
size_t input_bytes(const ConvProblem& p);

// Enqueues activated = relu(x·affine[0] + affine[1]) per input channel on ctx's stream.
void enqueue_input_apply(const ConvProblem& p, const void* x, const void* affine, void* activated, CudaContext& ctx);

// Milliseconds of that kernel on scratch memory (fastest of three); 0 when scratch is short.
float time_input_apply(const ConvProblem& p, CudaContext& ctx);

// The first of the prologue variants cuDNN builds (f16 scale/shift first for f16 data, as
// sm_90's engines want; then f32), with the graph `describe` makes of it; on failure, why the
// first variant was refused.
struct PrologueGraph {
  GraphBuild build;
  InputPrologue prologue;
};
PrologueGraph build_prologue_graph(CudaContext& ctx, DType io, const std::function<GraphDesc(const InputPrologue&)>& describe);

// Scratch bytes a prologue needs for its copy of the affine in the graph's dtype (0 for f32).
size_t affine_copy_bytes(const ConvProblem& p, const InputPrologue& prologue);

// Binds the graph's x_scale/x_shift to `affine` ([2, C] f32), converting it into `copy`
// first when the graph takes f16.
void bind_prologue_affine(const ConvProblem& p, const InputPrologue& prologue, const void* affine, void* copy,
                          std::array<void*, kMaxGraphUid + 1>& pointers, CudaContext& ctx);

}  // namespace trident::cuda
