// Entry points of the reference CPU kernels, one per op of docs/OPS.md, registered by
// register.cpp. Each takes the node's bound views in the order of the spec and dispatches
// on dtype internally (f32 and f64; labels i32).
#pragma once
#include <memory>

#include "backends/kernel.h"

namespace trident::cpu_ref {

// conv.cpp
void conv2d(const KernelArgs& args);
void conv2d_backward_data(const KernelArgs& args);
void conv2d_backward_weight(const KernelArgs& args);

// batchnorm.cpp: factories, since under sync-BN (BackendOptions::batchnorm_world) the batch
// statistics and the backward's sums span the context's world; batchnorm_affine gives the
// affine batchnorm2d (training) applies.
std::unique_ptr<Kernel> make_batchnorm2d(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);
std::unique_ptr<Kernel> make_batchnorm2d_backward(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);
std::unique_ptr<Kernel> make_batchnorm_affine(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);

// elementwise.cpp
void relu(const KernelArgs& args);
void relu_backward(const KernelArgs& args);
void add(const KernelArgs& args);
void fill(const KernelArgs& args);
void view_copy(const KernelArgs& args);  // flatten and reshape

// relu_mask.cpp: the packed ReLU mask (core/relu_mask.h), as ops and as helpers (`a` names
// the node in messages)
void relu_mask(const KernelArgs& args);
void relu_mask_backward(const KernelArgs& args);
void pack_relu_mask(const KernelArgs& a, const TensorView& y, const TensorView& mask);
void apply_relu_mask(const KernelArgs& a, const TensorView& mask, const TensorView& dy, const TensorView& dx);

// bn_apply.cpp: the cross-layer fusion's piece (ops/bn_apply.cpp), and its helper
void bn_apply(const KernelArgs& args);
void apply_bn(const KernelArgs& a, const TensorView& x, const TensorView& affine, const TensorView& y, bool relu);
// pool.cpp
void maxpool2d(const KernelArgs& args);
void maxpool2d_backward(const KernelArgs& args);
void maxpool2d_index_backward(const KernelArgs& args);
void avgpool2d(const KernelArgs& args);
void avgpool2d_backward(const KernelArgs& args);
void global_avgpool(const KernelArgs& args);
void global_avgpool_backward(const KernelArgs& args);

// dropout.cpp: the training mask (ops/dropout.h) and the random state's step
void dropout_mask(const KernelArgs& args);
void rng_advance(const KernelArgs& args);

// layernorm.cpp
void layernorm(const KernelArgs& args);
void layernorm_backward(const KernelArgs& args);

// linear.cpp
void linear(const KernelArgs& args);
void linear_backward_data(const KernelArgs& args);
void linear_backward_weight(const KernelArgs& args);

// loss.cpp
void softmax_cross_entropy(const KernelArgs& args);
void softmax_cross_entropy_backward(const KernelArgs& args);

// tensor_ops.cpp
void mul(const KernelArgs& args);
void mul_reduce(const KernelArgs& args);
void activation(const KernelArgs& args);
void activation_backward(const KernelArgs& args);
void clip(const KernelArgs& args);
void concat(const KernelArgs& args);
void resize_channels(const KernelArgs& args);
void channel_shuffle(const KernelArgs& args);

// pad_slice.cpp
void pad2d(const KernelArgs& args);
void channel_slice(const KernelArgs& args);

// precision.cpp
void cast(const KernelArgs& args);
void cast_group(const KernelArgs& args);

// optimizer.cpp
void sgd_update(const KernelArgs& args);
void adamw_update(const KernelArgs& args);

// fused_inference.cpp
void fold_batchnorm(const KernelArgs& args);
// quantize.cpp: an operand on its int8 grid (ops/int8_quant.h)
void quantize_dequantize(const KernelArgs& args);
// decomposed.cpp: a fused op run as its OpDef::decompose, on the reference kernels, or on
// `backend`'s where it has one for the piece (the cpu backend's deterministic mode and sync-BN)
std::unique_ptr<Kernel> make_decomposed(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);
std::unique_ptr<Kernel> make_decomposed_on(const std::string& backend, const ir::Node& n, const ir::Graph& g,
                                           BackendContext& ctx);
// allreduce_mean over the context's distributed world (collective.cpp); the cpu backend's too.
std::unique_ptr<Kernel> make_allreduce_mean(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);
// allreduce_wait: nothing to wait for where allreduce_mean returns finished (collective.cpp).
std::unique_ptr<Kernel> make_allreduce_wait(const ir::Node& n, const ir::Graph& g, BackendContext& ctx);

}  // namespace trident::cpu_ref
