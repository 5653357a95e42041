// Forward convolution + epilogue: the fused cuDNN graph, or the plain graph and the
// per-channel epilogue kernel when cuDNN refuses the fusion (or y aliases the residual).
#include "backends/cuda/conv_forward.h"

#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

device::ElemType elem(DType t) {
  const auto e = device::elem_type(t);
  if (!e) throw Error("the cuda backend computes in f32, f16 or bf16, not " + std::string(dtype_name(t)));
  return *e;
}

}  // namespace

ConvForward::ConvForward(const ir::Node& node, const ConvProblem& problem, const ConvEpilogue& epilogue,
                         CudaContext& ctx, WorkspaceLayout& layout)
    : problem_(problem), epilogue_(epilogue) {
  FpropFusion fused;
  fused.bias = epilogue.bias;
  fused.bias_dtype = epilogue.bias_dtype;
  fused.residual = epilogue.residual;
  fused.relu = epilogue.relu;
  fused.relu_max = epilogue.relu_max;
  std::string why_not_fused;
  if (fused.any_epilogue() && epilogue.residual && epilogue.residual_in_place) {
    why_not_fused = "the output shares the residual's buffer";
  } else {
    GraphBuild b = cached_graph(ctx, fprop_graph(problem, fused));
    if (b.graph) {
      graph_ = b.graph;
      path_ = "one cuDNN graph: " + fused.describe();
    } else if (!fused.any_epilogue()) {
      fail(node, b.failure + " (" + problem.describe() + ")");
    } else {
      why_not_fused = b.failure;
    }
  }
  if (!graph_) {
    GraphBuild plain = cached_graph(ctx, fprop_graph(problem, FpropFusion{}));
    if (!plain.graph) fail(node, plain.failure + " (" + problem.describe() + ")");
    graph_ = plain.graph;
    fell_back_ = true;
    to_scratch_ = epilogue.residual_in_place && epilogue.residual;
    path_ = "cuDNN conv_fprop + epilogue kernel (" + fused.describe() + " not fused: " + why_not_fused + ")";
    if (verbose()) verbose_note("node '" + node.name + "': " + path_);
  }
  cudnn_offset_ = layout.add(graph_->workspace_bytes());
  if (to_scratch_) scratch_offset_ = layout.add(problem.output_bytes());
}

void ConvForward::run(const Pointers& p, void* workspace, CudaContext& ctx) const {
  std::array<void*, kMaxGraphUid + 1> ptr{};
  void* conv_out = to_scratch_ ? at_offset(workspace, scratch_offset_) : p.y;
  ptr[conv_uid::x] = const_cast<void*>(p.x);
  ptr[conv_uid::w] = const_cast<void*>(p.w);
  ptr[conv_uid::y] = conv_out;
  if (!fell_back_) {
    ptr[conv_uid::bias] = const_cast<void*>(p.bias);
    ptr[conv_uid::residual] = const_cast<void*>(p.residual);
  }
  graph_->execute(ctx.cudnn(), ptr, at_offset(workspace, cudnn_offset_));
  if (!fell_back_) return;
  device::ChannelAffineArgs a;
  a.io = elem(problem_.dtype);
  a.x = conv_out;
  a.shift = epilogue_.bias ? p.bias : nullptr;
  a.shift_type = elem(epilogue_.bias_dtype);
  a.residual = epilogue_.residual ? p.residual : nullptr;
  a.y = p.y;
  a.rows = problem_.output_rows();
  a.channels = problem_.K;
  a.relu = epilogue_.relu;
  a.relu_max = epilogue_.relu_max;
  device::launch_channel_affine(a, ctx.stream());
}

}  // namespace trident::cuda
