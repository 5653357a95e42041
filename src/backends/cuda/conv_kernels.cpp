// The convolution kernels of the cuda backend, on cuDNN graphs built once per signature:
// conv2d and conv2d_epilogue (ConvForward: one fused graph, or conv + epilogue kernel),
// conv2d_backward_data (dgrad) and conv2d_backward_weight (wgrad, with db = Σdy per channel
// from a deterministic reduction kernel). run() binds pointers and enqueues; nothing else.
#include <array>
#include <iomanip>
#include <optional>
#include <sstream>

#include "backends/cuda/conv_forward.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dgrad_beside_wgrad.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/input_prologue.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/conv_stages.h"

namespace trident::cuda {

namespace {

void expect_views(const KernelArgs& a, size_t in, size_t out) {
  if (a.in.size() != in || a.out.size() != out)
    fail(a.node, "was built for " + std::to_string(in) + " inputs and " + std::to_string(out) +
                     " outputs but runs with " + std::to_string(a.in.size()) + " and " + std::to_string(a.out.size()));
}

// Runs `body`, re-throwing a failure as a sentence naming the node.
template <class F>
void naming_node(const ir::Node& node, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("cuda kernel for node", 0) == 0) throw;
    fail(node, what);
  }
}

// conv2d (x, w, b?) and conv2d_epilogue (x, w, b if has_bias, residual if residual).
class ConvForwardKernel final : public Kernel, public ReportsPath {
 public:
  ConvForwardKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) {
    const bool fused_op = node.op == "conv2d_epilogue";
    if (fused_op) {
      const ops::ConvStages stages = ops::ConvStages::of(node);
      if (stages.int8)
        fail(node, "is an int8 convolution, which the cuda backend does not run yet (int8 runs on the CPU backends)");
      epilogue_.bias = stages.bias;
      epilogue_.residual = stages.residual != ops::ConvStages::Residual::none;
      epilogue_.relu = stages.relu;
      epilogue_.relu_max = static_cast<float>(stages.relu_max);
      epilogue_.residual_in_place = epilogue_.residual && node.attrs.i("inplace_residual", 0) != 0;
      const size_t want = 2 + (epilogue_.bias ? 1 : 0) + (epilogue_.residual ? 1 : 0);
      expect_arity(node, want, want, 1, 1);
    } else {
      expect_arity(node, 2, 3, 1, 1);
      epilogue_.bias = node.inputs.size() == 3;
    }
    const ir::Value &x = input_value(node, g, 0), &w = input_value(node, g, 1), &y = output_value(node, g, 0);
    elem_of(node, x, "the input");
    expect_dtype(node, w, x.dtype, "the weight");
    expect_dtype(node, y, x.dtype, "the output");
    if (epilogue_.bias) {
      const ir::Value& b = input_value(node, g, 2);
      elem_of(node, b, "the bias");
      if (b.dtype != x.dtype && b.dtype != DType::f32)
        fail(node, "the bias '" + b.name + "' is " + std::string(dtype_name(b.dtype)) + "; it must be f32 or " +
                       std::string(dtype_name(x.dtype)) + " like the input");
      epilogue_.bias_dtype = b.dtype;
      expect_shape(node, b, Shape{w.shape.at(0)}, "the bias");
    }
    problem_ = conv_problem(node, x.shape, w.shape, y.shape, x.dtype);
    if (epilogue_.residual) {
      const ir::Value& r = input_value(node, g, node.inputs.size() - 1);
      expect_dtype(node, r, x.dtype, "the residual");
      expect_shape(node, r, y.shape, "the residual");
    }
    WorkspaceLayout layout;
    conv_.emplace(node, problem_, epilogue_, ctx, layout);
    ctx.reserve_workspace(0, layout.total());
    ctx_ = &ctx;
    arity_in_ = node.inputs.size();
  }

  void run(const KernelArgs& a) override {
    expect_views(a, arity_in_, 1);
    naming_node(a.node, [&] {
      ConvForward::Pointers p;
      p.x = a.in[0].data;
      p.w = a.in[1].data;
      if (epilogue_.bias) p.bias = a.in[2].data;
      if (epilogue_.residual) p.residual = a.in.back().data;
      p.y = a.out[0].data;
      conv_->run(p, ctx_->workspace(0), *ctx_);
    });
  }

  bool fell_back() const override { return conv_->fell_back(); }
  std::string path() const override { return conv_->path(); }
  std::string implementation() const override { return conv_->path(); }

 private:
  CudaContext* ctx_ = nullptr;
  ConvProblem problem_;
  ConvEpilogue epilogue_;
  std::optional<ConvForward> conv_;
  size_t arity_in_ = 0;
};

// Where a convolution's backward is dgrad immediately followed by its wgrad (both reading the
// same dy, the order autodiff emits; dgrad_beside_wgrad.h), with the side stream on the dgrad
// runs there beside the wgrad on the main stream, and the main stream waits for it right after
// the wgrad. The memory plan knows (CudaContext::concurrent_steps): every tensor of the two is
// live across both, so the wgrad's dw cannot take the bytes of the dgrad's weight, which in
// f16/bf16 is a cast copy whose last reader is the dgrad.
int position_in_order(const ir::Graph& g, int node_id) {
  const std::vector<int>& order = g.order();
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] == node_id) return static_cast<int>(i);
  return -1;
}

// conv2d_backward_data: dy [N,P,Q,K], w → dx [N,H,W,C].
class ConvDgradKernel final : public Kernel {
 public:
  ConvDgradKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    expect_arity(node, 2, 2, 1, 1);
    const ir::Value &dy = input_value(node, g, 0), &w = input_value(node, g, 1), &dx = output_value(node, g, 0);
    elem_of(node, dy, "dy");
    expect_dtype(node, w, dy.dtype, "the weight");
    expect_dtype(node, dx, dy.dtype, "dx");
    const ConvProblem p = conv_problem(node, dx.shape, w.shape, dy.shape, dy.dtype);
    GraphBuild b = cached_graph(ctx, dgrad_graph(p));
    if (!b.graph) fail(node, b.failure);
    graph_ = b.graph;
    side_ = ctx.kernel_options().backend.side_stream && dgrad_then_wgrad(g, position_in_order(g, node.id));
    if (side_) fork_ = ctx.stream_fork(node.inputs[0]);
    ctx.reserve_workspace(side_ ? 1 : 0, graph_->workspace_bytes());
  }

  void run(const KernelArgs& a) override {
    expect_views(a, 2, 1);
    naming_node(a.node, [&] {
      std::array<void*, kMaxGraphUid + 1> ptr{};
      ptr[conv_uid::dy] = a.in[0].data;
      ptr[conv_uid::w] = a.in[1].data;
      ptr[conv_uid::dx] = a.out[0].data;
      if (!side_) {
        graph_->execute(ctx_->cudnn(), ptr, ctx_->workspace(0));
        return;
      }
      // The side stream's workspace first: its first allocation queues work on the main stream
      // (TRIDENT_POISON_ARENA's fill), which the fork below must order before the dgrad.
      void* side_workspace = ctx_->workspace(1);
      check(cudaEventRecord(fork_.fork, ctx_->stream()), "forking the dgrad onto the side stream");
      check(cudaStreamWaitEvent(ctx_->side_stream(), fork_.fork, 0), "forking the dgrad onto the side stream");
      // The plan was built with the main handle: run it there, with the handle pointed at the
      // side stream for this one call.
      struct OnSideStream {  // back on the main stream however execute() ends
        CudaContext* ctx;
        ~OnSideStream() { cudnnSetStream(ctx->cudnn(), ctx->stream()); }
      } restore{ctx_};
      check(cudnnSetStream(ctx_->cudnn(), ctx_->side_stream()), "pointing cuDNN at the side stream");
      graph_->execute(ctx_->cudnn(), ptr, side_workspace);
      check(cudaEventRecord(fork_.join, ctx_->side_stream()), "marking the end of the side-stream dgrad");
    });
  }

  std::string implementation() const override {
    return side_ ? "cuDNN dgrad on the side stream, beside its wgrad" : std::string();
  }

 private:
  CudaContext* ctx_;
  std::shared_ptr<const CudnnGraph> graph_;
  bool side_ = false;
  CudaContext::StreamFork fork_;
};

// conv2d_backward_weight: x, dy[, x_affine] → dw [K,R,S,C/g], and db [K] = Σ dy when
// has_bias. With x_affine (defer_bn_apply) the convolution's input was relu(x·scale + shift):
// recomputed inside cuDNN's graph (ConvBNwgrad) where it builds and, timed, beats the apply
// kernel into scratch followed by the plain wgrad; otherwise that way.
class ConvWgradKernel final : public Kernel, public ReportsPath {
 public:
  ConvWgradKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    expect_arity(node, 2, 3, 1, 2);
    prologue_ = node.inputs.size() == 3;
    has_bias_ = node.outputs.size() == 2;
    if (has_bias_ != (node.attrs.i("has_bias", has_bias_ ? 1 : 0) != 0))
      fail(node, "attribute has_bias disagrees with the number of outputs");
    const ir::Value &x = input_value(node, g, 0), &dy = input_value(node, g, 1), &dw = output_value(node, g, 0);
    elem_of(node, x, "the input");
    expect_dtype(node, dy, x.dtype, "dy");
    expect_dtype(node, dw, x.dtype, "dw");
    problem_ = conv_problem(node, x.shape, dw.shape, dy.shape, x.dtype);
    if (prologue_) {
      const ir::Value& affine = input_value(node, g, 2);
      if (affine.dtype != DType::f32 || affine.shape != Shape{2, problem_.C})
        fail(node, "the input's affine must be f32 [2," + std::to_string(problem_.C) + "]");
    }
    GraphBuild b = cached_graph(ctx, wgrad_graph(problem_));
    if (!b.graph) fail(node, b.failure);
    graph_ = b.graph;
    WorkspaceLayout layout;
    if (prologue_) choose_prologue(ctx, layout);
    cudnn_offset_ = layout.add(graph_->workspace_bytes());
    if (has_bias_) {
      const ir::Value& db = output_value(node, g, 1);
      db_type_ = elem_of(node, db, "db");
      expect_shape(node, db, Shape{problem_.K}, "db");
      partials_offset_ = layout.add(device::channel_sums_scratch_bytes(problem_.output_rows(), problem_.K));
      sum_offset_ = layout.add(static_cast<size_t>(problem_.K) * sizeof(float));
    }
    io_ = elem_of(node, x, "the input");
    ctx.reserve_workspace(0, layout.total());
    joins_ = ctx.kernel_options().backend.side_stream && dgrad_then_wgrad(g, position_in_order(g, node.id) - 1);
    if (joins_) fork_ = ctx.stream_fork(node.inputs[1]);
  }

  void run(const KernelArgs& a) override {
    expect_views(a, prologue_ ? 3 : 2, has_bias_ ? 2 : 1);
    naming_node(a.node, [&] {
      void* ws = ctx_->workspace(0);
      std::array<void*, kMaxGraphUid + 1> ptr{};
      ptr[conv_uid::x] = a.in[0].data;
      if (prologue_ && !fused_prologue_) {
        ptr[conv_uid::x] = at_offset(ws, activated_offset_);
        enqueue_input_apply(problem_, a.in[0].data, a.in[2].data, ptr[conv_uid::x], *ctx_);
      } else if (prologue_) {
        bind_prologue_affine(problem_, prologue_graph_, a.in[2].data, at_offset(ws, affine_copy_offset_), ptr, *ctx_);
      }
      ptr[conv_uid::dy] = a.in[1].data;
      ptr[conv_uid::dw] = a.out[0].data;
      graph_->execute(ctx_->cudnn(), ptr, at_offset(ws, cudnn_offset_));
      if (has_bias_) {
        float* sum = at_offset<float>(ws, sum_offset_);
        device::launch_channel_sums(io_, a.in[1].data, problem_.output_rows(), problem_.K,
                                    at_offset<float>(ws, partials_offset_), sum, nullptr, ctx_->stream());
        device::launch_store_channels(sum, a.out[1].data, db_type_, problem_.K, ctx_->stream());
      }
      // The dgrad beside this kernel must be done before anything after it runs.
      if (joins_) check(cudaStreamWaitEvent(ctx_->stream(), fork_.join, 0), "joining the side-stream dgrad");
    });
  }

  // Only a prologue has two paths to report.
  bool fell_back() const override { return prologue_ && !fused_prologue_; }
  std::string path() const override { return path_; }
  std::string implementation() const override { return path_; }

 private:
  void choose_prologue(CudaContext& ctx, WorkspaceLayout& layout) {
    PrologueGraph fused =
        build_prologue_graph(ctx, problem_.dtype, [&](const InputPrologue& p) { return wgrad_graph(problem_, p); });
    std::string timing;
    if (fused.build.graph && fused.build.graph->tuned_ms() > 0.f && graph_->tuned_ms() > 0.f) {
      const float apply_ms = time_input_apply(problem_, ctx);
      if (apply_ms > 0.f) {
        std::ostringstream t;
        t << std::fixed << std::setprecision(3) << " (timed: " << fused.build.graph->tuned_ms()
          << " ms, against apply " << apply_ms << " ms + wgrad " << graph_->tuned_ms() << " ms)";
        timing = t.str();
        if (apply_ms + graph_->tuned_ms() < fused.build.graph->tuned_ms()) {
          fused.build.failure = "slower" + timing;
          fused.build.graph.reset();
        }
      }
    }
    if (fused.build.graph) {
      graph_ = fused.build.graph;
      prologue_graph_ = fused.prologue;
      fused_prologue_ = true;
      affine_copy_offset_ = layout.add(affine_copy_bytes(problem_, prologue_graph_));
      path_ = "one cuDNN graph: scale+shift(" +
              std::string(dtype_name(prologue_graph_.affine)) + ")+relu+conv_wgrad" + timing;
      return;
    }
    activated_offset_ = layout.add(input_bytes(problem_));
    const std::string& why = fused.build.failure;
    path_ = "input apply kernel, then cuDNN conv_wgrad (prologue graph " +
            (why.rfind("slower", 0) == 0 ? why : "refused: " + why) + ")";
  }

  CudaContext* ctx_;
  ConvProblem problem_;
  std::shared_ptr<const CudnnGraph> graph_;
  bool prologue_ = false, fused_prologue_ = false;
  InputPrologue prologue_graph_;  // the variant of the fused prologue graph
  size_t activated_offset_ = 0, affine_copy_offset_ = 0;
  std::string path_;
  bool has_bias_ = false;
  device::ElemType io_ = device::ElemType::f32, db_type_ = device::ElemType::f32;
  size_t cudnn_offset_ = 0, partials_offset_ = 0, sum_offset_ = 0;
  bool joins_ = false;
  CudaContext::StreamFork fork_;
};

}  // namespace

void register_conv_kernels() {
  add_kernel<ConvForwardKernel>({"conv2d", "conv2d_epilogue"});
  add_kernel<ConvDgradKernel>("conv2d_backward_data");
  add_kernel<ConvWgradKernel>("conv2d_backward_weight");
}

}  // namespace trident::cuda
