// Registration entry points of the oneDNN "cpu" backend (one per op family file), the helper
// registering a Kernel class for an op, and the step builders that fused kernels reuse.
#pragma once
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "backends/cpu/reference_routing.h"
#include "backends/cpu/onednn_util.h"
#include "backends/kernel.h"
#include "ops/activation_math.h"
#include "ops/conv_stages.h"

namespace trident::cpu {

inline constexpr const char* kBackend = "cpu";

// oneDNN's own exceptions (a descriptor it cannot implement) become an Error naming the node.
// Kernels whose constructor takes the CpuContext get the executable's. In deterministic mode
// and under sync-BN some ops get reference_routing.h's kernel instead.
// A factory choosing among kernel classes for one op (int8 or f32...), with add_kernel's
// reference routing and oneDNN error sentence.
using CpuKernelFactory = std::unique_ptr<Kernel> (*)(const ir::Node&, const ir::Graph&, const CpuContext&);
inline void add_factory(const char* op, CpuKernelFactory make) {
  KernelRegistry::add(kBackend, op, [make](const ir::Node& node, const ir::Graph& g, BackendContext& ctx) {
    if (auto reference = reference_kernel(node, g, ctx)) return reference;
    try {
      return make(node, g, cpu_context(ctx));
    } catch (const dnnl::error& e) {
      fail(node, std::string("oneDNN could not build its primitive (") + e.what() + ")");
    }
  });
}

template <class K>
void add_kernel(const char* op) {
  add_factory(op, [](const ir::Node& node, const ir::Graph& g, const CpuContext& ctx) -> std::unique_ptr<Kernel> {
    if constexpr (std::is_constructible_v<K, const ir::Node&, const ir::Graph&, const CpuContext&>)
      return std::make_unique<K>(node, g, ctx);
    else
      return std::make_unique<K>(node, g);
  });
}
// One kernel class for every op it runs (a forward and its variants, say).
template <class K>
void add_kernel(std::initializer_list<const char*> ops) {
  for (const char* op : ops) add_kernel<K>(op);
}

// ---- step builders, shared by the single-op kernels and the fused ones (fused.cpp) ----

// conv.cpp: y = conv(x, w) [+ bias] with the node's stride/padding/dilation/groups.
struct ConvOperands {
  Operand x, w;
  std::optional<Operand> bias;
  Operand y;
};
// Optional oneDNN post-ops (an inference epilogue): `sum` adds the value y already holds,
// then `relu` clamps: y = relu(conv(x, w) + bias + y_before).
struct ConvPostOps {
  bool sum = false;
  bool relu = false;
  float relu_max = 0;  // > 0: the relu clips at this value (ReLU6)
  // A point-wise activation in the relu's place (conv2d_epilogue's activation stage): oneDNN's
  // eltwise algorithm and its α (onednn_activation); undef: none.
  dnnl::algorithm activation = dnnl::algorithm::undef;
  float activation_alpha = 0;
};
// conv.cpp: the post-ops of a conv2d_epilogue's stages (the residual sum, then the relu, its clip
// or an activation oneDNN has; fails for one it has not), and their oneDNN chain appended to
// `chain` in that order, for the f32 convolution and the int8 one alike.
ConvPostOps conv_post_ops(const ir::Node& node, const ops::ConvStages& stages);
void append_post_ops(dnnl::post_ops& chain, const ConvPostOps& post);
// How a forward convolution may run: in an inference executable (or with post-ops, which only
// inference graphs have) the implementation timing chose among oneDNN's direct and, where
// BackendOptions::winograd allows, Winograd ones (conv_algorithms.h); Winograd's blocked
// activation copies live in `scratch`. Without a scratch arena: oneDNN's first direct one.
struct ConvAlgorithms {
  BackendContext::KernelOptions options;  // the executable's: constant weights, timing, Winograd
  std::shared_ptr<ScratchArena> scratch;
  static ConvAlgorithms from(const CpuContext& ctx) { return {ctx.kernel_options(), ctx.scratch()}; }
};
void append_conv_forward(PrimitiveKernel& k, const ir::Node& node, const Shape& x,
                         const Shape& w, const Shape& y, const ConvOperands& ops,
                         const ConvPostOps& post = {}, const ConvAlgorithms& algorithms = {});

// batchnorm.cpp: training-mode batchnorm (eps, momentum from the node) as a primitive step
// plus a host epilogue, run after the kernel's steps, writing saved_invstd and the running
// statistics (outputs may alias the running-stat inputs).
struct BnTrainingOperands {
  Operand x;
  ViewRef gamma, beta, running_mean, running_var;
  Operand y;
  ViewRef saved_mean, saved_invstd, running_mean_out, running_var_out;
  // A cancelled convolution bias (ops/cbr_operands.h): the running mean also takes momentum·b.
  std::optional<ViewRef> cancelled_bias;
};
class BnTraining {
 public:
  // fuse_relu: y = relu(bn(x)) in the same pass (oneDNN's fuse_norm_relu; the mask it keeps
  // in its workspace is kernel-owned and unused, the backward reads the mask from y).
  BnTraining(PrimitiveKernel& k, const ir::Node& node, const Shape& x, const BnTrainingOperands& ops,
             bool fuse_relu = false);
  void finish(const KernelArgs& args) const;

 private:
  BnTrainingOperands ops_;
  double eps_, momentum_;
  int64_t C_, M_;
  memory var_;
};

// batchnorm.cpp: training-mode batchnorm backward from saved_mean/saved_invstd; prepare()
// (before the kernel's steps) turns saved_invstd into the variance oneDNN wants.
struct BnBackwardOperands {
  Operand x, dy;
  ViewRef gamma, saved_mean, saved_invstd;
  Operand dx;
  ViewRef dgamma, dbeta;
};
class BnBackward {
 public:
  BnBackward(PrimitiveKernel& k, const ir::Node& node, const Shape& x, const BnBackwardOperands& ops);
  void prepare(const KernelArgs& args) const;

 private:
  ViewRef saved_invstd_;
  double eps_;
  int64_t C_;
  memory var_;
};

// activation.cpp: oneDNN's eltwise algorithm and its α for an activation, or nothing where
// oneDNN has none (hardsigmoid); the activation kernels and the convolution epilogue's post-op.
std::optional<std::pair<dnnl::algorithm, float>> onednn_activation(ops::ActivationFn fn);

// elementwise.cpp: element-wise steps over `numel` elements (in place allowed). relu_max > 0:
// the relu clipped at relu_max (ReLU6), its backward passing dy where 0 < y < relu_max.
void append_relu(PrimitiveKernel& k, int64_t numel, const Operand& x, const Operand& y, float relu_max = 0);
void append_relu_backward(PrimitiveKernel& k, int64_t numel, const Operand& y, const Operand& dy,
                          const Operand& dx, float relu_max = 0);
// relu_after: y = relu(a + b) in one pass (a relu post-op on the binary primitive).
void append_add(PrimitiveKernel& k, int64_t numel, const Operand& a, const Operand& b,
                const Operand& y, bool relu_after = false);
// The element count every input and output of an element-wise node holds; throws where one differs.
int64_t common_numel(const ir::Node& node, const ir::Graph& g);

// ---- registration ----

void register_conv_kernels();               // conv.cpp
void register_batchnorm_kernels();          // batchnorm.cpp (and batchnorm_relu_backward)
void register_elementwise_kernels();        // elementwise.cpp
void register_activation_kernels();         // activation.cpp
void register_elementwise_fused_kernels();  // elementwise_fused.cpp
void register_pool_kernels();               // pool.cpp
void register_linear_kernels();             // linear.cpp
void register_loss_kernels();               // loss.cpp
void register_optimizer_kernels();          // optimizer.cpp
void register_collective_kernels();         // collective.cpp: allreduce_mean, allreduce_wait
void register_tensor_kernels();             // tensor_ops.cpp
void register_fused_cbr_kernels();          // fused_cbr.cpp (cbr, cbar)
void register_fused_inference_kernels();    // fused_inference.cpp (conv2d_epilogue, fold_batchnorm)
void register_quantize_kernels();           // quantize.cpp (quantize_dequantize)

}  // namespace trident::cpu
