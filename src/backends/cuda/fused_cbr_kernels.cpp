// The fused training ops cbr, cbar and conv_bn_stats on the GPU, in three steps on one stream:
//   0. with a prologue (defer_bn_apply), the convolution reads relu(x·scale + shift) of the raw
//      x: inside cuDNN's graph (scale → bias → relu → conv_fprop → genstats, "ConvBNfprop"),
//      or, where cuDNN refuses it or (timed) it is slower, made first by the apply kernel in
//      scratch — never stored past this node either way;
//   1. conv_out = conv2d(x, w, b?) and its per-channel Σ, Σ² — one cuDNN graph
//      (conv_fprop [+ bias] + genstats), or, where cuDNN refuses genstats or (timed when
//      autotuning) its genstats engines are slower, the forward convolution followed by the
//      deterministic channel-sums kernel; for a first layer's few input channels, trident's
//      own convolution with statistics (device/small_channel_conv.h) where it is faster;
//   2. finalize: (under sync-BN, after Σ, Σ² are summed over the ranks: batchnorm_rank_sum.h)
//      batch mean/invstd, saved and running statistics, per-channel scale/shift;
//   3. apply: y = relu(conv_out·scale + shift [+ residual, or a projection shortcut's raw
//      conv output through its batchnorm affine]) (the relu clipped at relu_max for ReLU6),
//      and with attribute relu_mask its
//      packed 1-bit mask (core/relu_mask.h) in the same pass. conv_bn_stats stops before it:
//      its finalize writes scale/shift to its affine output for the next convolution.
// The pre-relu value is never stored: batchnorm_relu_backward masks with y > 0 (0 < y < relu_max)
// or the bits.
#include <array>
#include <iomanip>
#include <optional>
#include <sstream>

#include "backends/cuda/batchnorm_rank_sum.h"
#include "backends/cuda/build_timing.h"
#include "backends/cuda/conv_forward.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/device/small_channel_conv.h"
#include "backends/cuda/input_prologue.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "core/relu_mask.h"
#include "ops/cbr_operands.h"
#include "ops/conv_stages.h"
#include "ops/norm_params.h"

namespace trident::cuda {

namespace {

// Input and output positions of cbr/cbar/conv_bn_stats, from ops/cbr_operands.h.
constexpr size_t kX = ops::cbr_in::x, kW = ops::cbr_in::w, kGamma = ops::cbr_in::gamma, kBeta = ops::cbr_in::beta,
                 kRunningMean = ops::cbr_in::running_mean, kRunningVar = ops::cbr_in::running_var;
constexpr size_t kY = ops::cbr_out::y, kAffine = ops::cbr_out::affine, kConvOut = ops::cbr_out::conv_out,
                 kSavedMean = ops::cbr_out::saved_mean, kSavedInvstd = ops::cbr_out::saved_invstd,
                 kRunningMeanOut = ops::cbr_out::running_mean, kRunningVarOut = ops::cbr_out::running_var,
                 kReluMask = ops::cbr_out::relu_mask;


class CbrKernel final : public Kernel, public ReportsPath {
 public:
  CbrKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    read_stages(node);
    const ConvEpilogue bias_only = check_capabilities(node, g);
    WorkspaceLayout layout;
    FpropFusion with_stats;
    with_stats.bias = bias_only.bias;
    with_stats.bias_dtype = bias_only.bias_dtype;
    with_stats.genstats = true;
    choose_statistics(node, ctx, with_stats, bias_only, layout);
    if (operands_.x_affine >= 0) choose_prologue(node, ctx, with_stats, layout);
    else choose_small_conv(node, ctx, layout);
    const size_t channel_bytes = static_cast<size_t>(problem_.K) * sizeof(float);
    sum_offset_ = layout.add(channel_bytes);
    sq_sum_offset_ = layout.add(channel_bytes);
    scale_offset_ = layout.add(channel_bytes);
    shift_offset_ = layout.add(channel_bytes);
    ctx.reserve_workspace(0, layout.total());
    inputs_ = node.inputs.size();
    over_ranks_ = BatchnormRankSum::make(node, true, ctx);
  }

  void run(const KernelArgs& a) override {
    if (a.in.size() != inputs_ || a.out.size() != outputs_)
      fail(a.node, "was built for " + std::to_string(inputs_) + " inputs and " + std::to_string(outputs_) +
                       " outputs but runs with " + std::to_string(a.in.size()) + " and " + std::to_string(a.out.size()));
    try {
      enqueue(a);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("cuda kernel for node", 0) == 0) throw;
      fail(a.node, what);
    }
  }

  // True when the statistics come from the channel-sums kernel (genstats refused or slower).
  bool fell_back() const override { return !stats_graph_ && !small_conv_; }
  std::string path() const override { return path_; }
  std::string implementation() const override { return over_ranks_ ? path_ + "; " + over_ranks_->describe() : path_; }

 private:
  // The node's stages (ops/conv_stages.h), where its optional operands sit, and its batchnorm's
  // eps and momentum.
  void read_stages(const ir::Node& node) {
    const ops::ConvStages stages = ops::ConvStages::of(node);
    cbar_ = stages.residual != ops::ConvStages::Residual::none;
    stats_only_ = !stages.apply_affine;
    operands_ = ops::CbrOperands::of(node);
    bit_mask_ = stages.bit_mask;
    relu_max_ = static_cast<float>(stages.relu_max);
    // exact_affine (defer_bn_apply, for a max pooling's prologue): every reader of the affine is
    // one of trident's kernels, which take f32, so it is not rounded to f16 values for cuDNN.
    round_affine_ = stats_only_ && !stages.exact_affine;
    outputs_ = bit_mask_ ? 7 : 6;
    // A cancelled bias (ops/cbr_operands.h) is not added by the convolution; the finalize
    // adds momentum·b to the running mean.
    cancelled_bias_ = stages.bias_cancelled;
    has_bias_ = operands_.bias >= 0 && !cancelled_bias_;
    const ops::NormParams norm = ops::NormParams::of(node);
    eps_ = norm.eps;
    momentum_ = norm.momentum;
  }

  // What this kernel needs beyond what the op's shape inference has verified (arity, shapes,
  // the affines' f32 [2, C], eps): element types it runs, a bias in f32 or the input's type,
  // whole bytes of a packed mask, more than one value per channel. Returns the convolution's
  // bias-only epilogue.
  ConvEpilogue check_capabilities(const ir::Node& node, const ir::Graph& g) {
    const ir::Value &x = input_value(node, g, kX), &w = input_value(node, g, kW);
    const ir::Value& conv_out = output_value(node, g, kConvOut);
    io_ = elem_of(node, x, "the input");
    expect_dtype(node, w, x.dtype, "the weight");
    expect_dtype(node, conv_out, x.dtype, "conv_out");
    if (!stats_only_) expect_dtype(node, output_value(node, g, kY), x.dtype, "the output y");
    const Shape& y_shape = conv_out.shape;
    problem_ = conv_problem(node, x.shape, w.shape, y_shape, x.dtype);
    const char* in_names[] = {"", "", "gamma", "beta", "running_mean", "running_var"};
    for (size_t i = kGamma; i <= kRunningVar; ++i) in_types_[i] = elem_of(node, input_value(node, g, i), in_names[i]);
    const char* out_names[] = {"", "", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out"};
    for (size_t o = kSavedMean; o <= kRunningVarOut; ++o)
      out_types_[o] = elem_of(node, output_value(node, g, o), out_names[o]);
    if (bit_mask_) {
      if (y_shape.back() % 8 != 0) fail(node, "a packed relu mask needs a multiple of 8 output channels");
      mask_row_bytes_ = relu_mask_words(y_shape.back()) * 4;
    }
    if (cbar_) expect_dtype(node, input_value(node, g, operands_.residual), x.dtype, "the residual");
    ConvEpilogue bias_only;
    if (operands_.bias >= 0) {
      const ir::Value& b = input_value(node, g, operands_.bias);
      bias_type_ = elem_of(node, b, "the bias");
      if (b.dtype != x.dtype && b.dtype != DType::f32)
        fail(node, "the bias '" + b.name + "' is " + std::string(dtype_name(b.dtype)) + "; it must be f32 or " +
                       std::string(dtype_name(x.dtype)) + " like the input");
      bias_only.bias = has_bias_;
      bias_only.bias_dtype = b.dtype;
    }
    if (problem_.output_rows() < 2)
      fail(node, "training batchnorm needs more than one value per channel (N·P·Q = " +
                     std::to_string(problem_.output_rows()) + "); use a larger batch");
    return bias_only;
  }

  // Chooses how conv_out and its per-channel sums are made: cuDNN's conv + genstats graph, or
  // the plain convolution's best engine and the channel-sums kernel. Autotuned: cuDNN's fused
  // statistics are not always cheaper (some shapes only have slow genstats engines).
  void choose_statistics(const ir::Node& node, CudaContext& ctx, const FpropFusion& with_stats,
                         const ConvEpilogue& bias_only, WorkspaceLayout& layout) {
    GraphBuild stats = cached_graph(ctx, fprop_graph(problem_, with_stats));
    std::string timing;
    if (stats.graph && stats.graph->tuned_ms() > 0.f) {
      WorkspaceLayout unused;
      ConvForward plain(node, problem_, bias_only, ctx, unused);
      const float sums_ms = plain.tuned_ms() > 0.f ? time_channel_sums(ctx) : 0.f;
      if (sums_ms > 0.f) {
        std::ostringstream t;
        t << std::fixed << std::setprecision(3) << " (timed: conv+genstats " << stats.graph->tuned_ms()
          << " ms, conv " << plain.tuned_ms() << " ms + channel sums " << sums_ms << " ms)";
        timing = t.str();
        if (plain.tuned_ms() + sums_ms < stats.graph->tuned_ms()) {
          stats.failure = "slower" + timing;
          stats.graph.reset();
          timing.clear();
        }
      }
    }
    statistics_ms_ = stats.graph ? stats.graph->tuned_ms() : 0.f;
    if (stats.graph) {
      stats_graph_ = stats.graph;
      cudnn_offset_ = layout.add(stats_graph_->workspace_bytes());
      path_ = "one cuDNN graph: " + with_stats.describe() + ", then " + tail_kernels() + timing;
      return;
    }
    conv_.emplace(node, problem_, bias_only, ctx, layout);
    if (conv_->tuned_ms() > 0.f) {
      const float sums_ms = time_channel_sums(ctx);
      statistics_ms_ = sums_ms > 0.f ? conv_->tuned_ms() + sums_ms : 0.f;
    }
    partials_offset_ = layout.add(device::channel_sums_scratch_bytes(problem_.output_rows(), problem_.K));
    path_ = conv_->path() + ", channel-sums kernel (genstats " +
            (stats.failure.rfind("slower", 0) == 0 ? stats.failure : "refused: " + stats.failure) + "), then " +
            tail_kernels();
    if (verbose()) verbose_note("node '" + node.name + "': " + path_);
  }

  // Time (ms) of the channel-sums kernel over this layer's output, on scratch memory; 0 when
  // scratch memory is short.
  float time_channel_sums(CudaContext& ctx) const {
    const int64_t rows = problem_.output_rows(), K = problem_.K;
    TimingScratch scratch;
    void* out = scratch.get(problem_.output_bytes());
    auto* partials = static_cast<float*>(scratch.get(device::channel_sums_scratch_bytes(rows, K)));
    auto* sums = static_cast<float*>(scratch.get(2 * static_cast<size_t>(K) * sizeof(float)));
    if (!out || !partials || !sums) return 0.f;
    return best_of_three_ms(ctx.stream(), [&] {
      device::launch_channel_sums(io_, out, rows, K, partials, sums, sums + K, ctx.stream());
      return true;
    });
  }

  // Chooses how the prologue runs: inside cuDNN's graph where it builds and (timed) beats the
  // apply kernel plus the plain statistics path chosen above; otherwise the apply kernel
  // writes the activated input to scratch first.
  void choose_prologue(const ir::Node& node, CudaContext& ctx, const FpropFusion& plain, WorkspaceLayout& layout) {
    PrologueGraph fused = build_prologue_graph(ctx, problem_.dtype, [&](const InputPrologue& p) {
      FpropFusion f = plain;
      f.prologue = p;
      return fprop_graph(problem_, f);
    });
    FpropFusion fusion = plain;
    fusion.prologue = fused.prologue;
    std::string timing;
    if (fused.build.graph && fused.build.graph->tuned_ms() > 0.f && statistics_ms_ > 0.f) {
      const float apply_ms = time_input_apply(problem_, ctx);
      if (apply_ms > 0.f) {
        std::ostringstream t;
        t << std::fixed << std::setprecision(3) << " (timed: " << fused.build.graph->tuned_ms()
          << " ms, against apply " << apply_ms << " ms + " << statistics_ms_ << " ms)";
        timing = t.str();
        if (apply_ms + statistics_ms_ < fused.build.graph->tuned_ms()) {
          fused.build.failure = "slower" + timing;
          fused.build.graph.reset();
        }
      }
    }
    if (fused.build.graph) {
      prologue_graph_ = fused.build.graph;
      prologue_ = fused.prologue;
      prologue_offset_ = layout.add(prologue_graph_->workspace_bytes());
      affine_copy_offset_ = layout.add(affine_copy_bytes(problem_, prologue_));
      path_ = "one cuDNN graph: " + fusion.describe() + ", then " + tail_kernels() + timing;
      return;
    }
    activated_offset_ = layout.add(input_bytes(problem_));
    const std::string& why = fused.build.failure;
    path_ = "input apply kernel (prologue graph " + (why.rfind("slower", 0) == 0 ? why : "refused: " + why) +
            "), then " + path_;
    if (verbose()) verbose_note("node '" + node.name + "': " + path_);
  }

  // A first layer's few input channels: trident's own convolution with its statistics
  // (device/small_channel_conv.h) replaces the path chosen above where it takes the shape and,
  // where candidates are timed, beats that path; untimed it is taken wherever it applies.
  void choose_small_conv(const ir::Node& node, CudaContext& ctx, WorkspaceLayout& layout) {
    if (!ctx.kernel_options().backend.small_channel_conv) return;
    if (!small_conv_refusal(problem_, device::SmallConvKernel::forward).empty()) return;
    small_shape_ = small_conv_shape(problem_);
    std::string timing;
    if (ctx.kernel_options().backend.times_candidates() && statistics_ms_ > 0.f) {
      const float own_ms = time_small_conv(ctx);
      std::ostringstream t;
      t << std::fixed << std::setprecision(3) << " (timed: " << own_ms << " ms, against " << statistics_ms_ << " ms)";
      if (!(own_ms > 0.f) || own_ms >= statistics_ms_) {
        path_ += "; trident's small-channel convolution slower" + t.str();
        return;
      }
      timing = t.str();
      statistics_ms_ = own_ms;
    }
    stats_graph_.reset();
    conv_.reset();
    small_conv_ = true;
    small_scratch_offset_ = layout.add(device::small_conv_stats_scratch_bytes(small_shape_, ctx.sm_count()));
    path_ = "trident's small-channel convolution with statistics (tensor cores)" + timing + ", then " + tail_kernels();
    if (verbose()) verbose_note("node '" + node.name + "': " + path_);
  }

  device::SmallConvStatsArgs small_conv_args(const void* x, const void* w, const void* bias, void* y, float* sum,
                                             float* sq_sum, void* scratch) const {
    device::SmallConvStatsArgs s;
    s.io = io_;
    s.x = x;
    s.w = w;
    if (has_bias_) s.bias = {const_cast<void*>(bias), bias_type_};
    s.y = y;
    s.sum = sum;
    s.sq_sum = sq_sum;
    s.scratch = scratch;
    s.sm_count = ctx_->sm_count();
    return s;
  }

  // Time (ms) of the small-channel kernel on zero-filled scratch memory, as the other
  // candidates are timed (its work does not depend on the values); 0 when scratch is short.
  float time_small_conv(CudaContext& ctx) const {
    TimingScratch scratch;
    void* x = scratch.get(input_bytes(problem_));
    void* w = scratch.get(static_cast<size_t>(problem_.K * problem_.R * problem_.S * problem_.Cg) * dtype_size(problem_.dtype));
    void* bias = scratch.get(static_cast<size_t>(problem_.K) * sizeof(float));
    void* y = scratch.get(problem_.output_bytes());
    auto* sums = static_cast<float*>(scratch.get(2 * static_cast<size_t>(problem_.K) * sizeof(float)));
    void* partials = scratch.get(device::small_conv_stats_scratch_bytes(small_shape_, ctx.sm_count()));
    if (!x || !w || !bias || !y || !sums || !partials) return 0.f;
    const device::SmallConvStatsArgs args = small_conv_args(x, w, bias, y, sums, sums + problem_.K, partials);
    return best_of_three_ms(ctx.stream(), [&] {
      device::launch_small_conv_stats(small_shape_, args, ctx.stream());
      return true;
    });
  }

  // What runs after the statistics: conv_bn_stats hands its affine on instead of applying it.
  std::string tail_kernels() const { return stats_only_ ? "the finalize kernel" : "finalize and apply kernels"; }

  void enqueue(const KernelArgs& a) {
    void* ws = ctx_->workspace(0);
    float* sum = at_offset<float>(ws, sum_offset_);
    float* sq_sum = at_offset<float>(ws, sq_sum_offset_);
    enqueue_statistics(a, ws, sum, sq_sum);
    if (over_ranks_) over_ranks_->sum_in_place({sum, sq_sum}, static_cast<size_t>(problem_.K));
    const device::BnFinalizeArgs f = finalize_args(a, ws, sum, sq_sum);
    device::launch_bn_finalize(f, ctx_->stream());
    if (!stats_only_) enqueue_apply(a, f.scale, f.shift);
  }

  // conv_out and its per-channel Σ and Σ² by the path chosen at construction.
  void enqueue_statistics(const KernelArgs& a, void* ws, float* sum, float* sq_sum) {
    const void* bias = has_bias_ ? a.in[operands_.bias].data : nullptr;
    void* conv_out = a.out[kConvOut].data;
    const void* x = a.in[kX].data;
    const bool prologue = operands_.x_affine >= 0;

    if (prologue && !prologue_graph_) {
      void* activated = at_offset(ws, activated_offset_);
      enqueue_input_apply(problem_, x, a.in[operands_.x_affine].data, activated, *ctx_);
      x = activated;
    }
    if (small_conv_) {
      device::launch_small_conv_stats(
          small_shape_, small_conv_args(x, a.in[kW].data, bias, conv_out, sum, sq_sum, at_offset(ws, small_scratch_offset_)),
          ctx_->stream());
    } else if (prologue_graph_ || stats_graph_) {
      // One cuDNN graph: the statistics graph, or the same with the prologue in front.
      std::array<void*, kMaxGraphUid + 1> ptr{};
      if (prologue_graph_)
        bind_prologue_affine(problem_, prologue_, a.in[operands_.x_affine].data, at_offset(ws, affine_copy_offset_),
                             ptr, *ctx_);
      ptr[conv_uid::x] = const_cast<void*>(x);
      ptr[conv_uid::w] = a.in[kW].data;
      ptr[conv_uid::bias] = const_cast<void*>(bias);
      ptr[conv_uid::y] = conv_out;
      ptr[conv_uid::sum] = sum;
      ptr[conv_uid::sq_sum] = sq_sum;
      const CudnnGraph& graph = prologue_graph_ ? *prologue_graph_ : *stats_graph_;
      graph.execute(ctx_->cudnn(), ptr, at_offset(ws, prologue_graph_ ? prologue_offset_ : cudnn_offset_));
    } else {
      ConvForward::Pointers p;
      p.x = x;
      p.w = a.in[kW].data;
      p.bias = bias;
      p.y = conv_out;
      conv_->run(p, ws, *ctx_);
      device::launch_channel_sums(io_, conv_out, problem_.output_rows(), problem_.K, at_offset<float>(ws, partials_offset_),
                                  sum, sq_sum, ctx_->stream());
    }
  }

  // The finalize: batch statistics, running statistics and the affine (into the workspace, or
  // conv_bn_stats' affine output).
  device::BnFinalizeArgs finalize_args(const KernelArgs& a, void* ws, float* sum, float* sq_sum) const {
    const int64_t rows = problem_.output_rows(), K = problem_.K;
    device::BnFinalizeArgs f;
    f.sum = sum;
    f.sq_sum = sq_sum;
    f.count = over_ranks_ ? rows * over_ranks_->ranks() : rows;
    f.channels = K;
    f.eps = eps_;
    f.momentum = momentum_;
    f.gamma = {a.in[kGamma].data, in_types_[kGamma]};
    f.beta = {a.in[kBeta].data, in_types_[kBeta]};
    f.running_mean_in = {a.in[kRunningMean].data, in_types_[kRunningMean]};
    f.running_var_in = {a.in[kRunningVar].data, in_types_[kRunningVar]};
    f.saved_mean = {a.out[kSavedMean].data, out_types_[kSavedMean]};
    f.saved_invstd = {a.out[kSavedInvstd].data, out_types_[kSavedInvstd]};
    f.running_mean_out = {a.out[kRunningMeanOut].data, out_types_[kRunningMeanOut]};
    f.running_var_out = {a.out[kRunningVarOut].data, out_types_[kRunningVarOut]};
    f.scale = stats_only_ ? static_cast<float*>(a.out[kAffine].data) : at_offset<float>(ws, scale_offset_);
    f.shift = stats_only_ ? f.scale + K : at_offset<float>(ws, shift_offset_);
    f.affine_in_f16 = round_affine_ && io_ == device::ElemType::f16;
    if (cancelled_bias_) f.cancelled_bias = {a.in[operands_.bias].data, bias_type_};
    return f;
  }

  // y = relu(conv_out·scale + shift [+ residual (·its affine)]), clipped where ReLU6, and the mask.
  void enqueue_apply(const KernelArgs& a, const float* scale, const float* shift) {
    device::ChannelAffineArgs apply;
    apply.io = io_;
    apply.x = a.out[kConvOut].data;
    apply.scale = scale;
    apply.shift = shift;
    apply.shift_type = device::ElemType::f32;
    apply.residual = cbar_ ? a.in[operands_.residual].data : nullptr;
    if (operands_.residual_affine >= 0) apply.residual_affine = static_cast<const float*>(a.in[operands_.residual_affine].data);
    apply.y = a.out[kY].data;
    apply.rows = problem_.output_rows();
    apply.channels = problem_.K;
    apply.relu = true;
    apply.relu_max = relu_max_;
    apply.sm_count = ctx_->sm_count();
    if (bit_mask_) {
      apply.mask = a.out[kReluMask].data;
      apply.mask_row_bytes = mask_row_bytes_;
    }
    device::launch_channel_affine(apply, ctx_->stream());
  }

  CudaContext* ctx_;
  bool cbar_ = false, stats_only_ = false, has_bias_ = false, cancelled_bias_ = false, bit_mask_ = false;
  bool round_affine_ = false;
  device::ElemType bias_type_ = device::ElemType::f32;
  ops::CbrOperands operands_;
  size_t outputs_ = 6;
  int64_t mask_row_bytes_ = 0;
  float relu_max_ = 0.f;  // a clipped relu (ReLU6): the apply clips there too
  device::ElemType io_ = device::ElemType::f32;
  std::array<device::ElemType, 6> in_types_{}, out_types_{};
  ConvProblem problem_;
  double eps_ = 1e-5, momentum_ = 0.1;
  std::shared_ptr<const CudnnGraph> stats_graph_;  // conv [+ bias] + genstats, when cuDNN builds it
  std::optional<ConvForward> conv_;                // otherwise: the forward convolution alone
  std::shared_ptr<const CudnnGraph> prologue_graph_;  // prologue + conv [+ bias] + genstats, where chosen
  float statistics_ms_ = 0.f;  // timed cost of the statistics path without a prologue (0: untimed)
  bool small_conv_ = false;    // trident's small-channel convolution computes conv_out and Σ, Σ²
  device::SmallConvShape small_shape_;
  size_t small_scratch_offset_ = 0;
  InputPrologue prologue_;  // the variant of the prologue graph
  size_t prologue_offset_ = 0, activated_offset_ = 0, affine_copy_offset_ = 0;
  size_t cudnn_offset_ = 0, partials_offset_ = 0;
  size_t sum_offset_ = 0, sq_sum_offset_ = 0, scale_offset_ = 0, shift_offset_ = 0;
  size_t inputs_ = 0;
  std::string path_;
  std::unique_ptr<BatchnormRankSum> over_ranks_;  // sync-BN, or null
};

}  // namespace

void register_fused_cbr_kernels() {
  add_kernel<CbrKernel>({"cbr", "cbar", "conv_bn_stats"});
}

}  // namespace trident::cuda
