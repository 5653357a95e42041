// The fused training ops cbr and cbar on the GPU, in three steps on one stream:
//   1. conv_out = conv2d(x, w, b?) and its per-channel Σ, Σ² — one cuDNN graph
//      (conv_fprop [+ bias] + genstats), or, where cuDNN refuses genstats or (timed when
//      autotuning) its genstats engines are slower, the forward convolution followed by the
//      deterministic channel-sums kernel;
//   2. finalize: batch mean/invstd, saved and running statistics, per-channel scale/shift;
//   3. apply: y = relu(conv_out·scale + shift [+ residual]), and with attribute relu_mask its
//      packed 1-bit mask (core/relu_mask.h) in the same pass.
// The pre-relu value is never stored: batchnorm_relu_backward masks with y > 0 or the bits.
#include <array>
#include <iomanip>
#include <optional>
#include <sstream>

#include "backends/cuda/build_timing.h"
#include "backends/cuda/conv_forward.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/device/checks.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/kernels.h"
#include "core/relu_mask.h"

namespace trident::cuda {

namespace {

// Input and output positions of cbr/cbar (docs/OPS.md).
enum Input : size_t { kX = 0, kW = 1, kGamma = 2, kBeta = 3, kRunningMean = 4, kRunningVar = 5, kResidual = 6 };
enum Output : size_t {
  kY = 0, kConvOut = 1, kSavedMean = 2, kSavedInvstd = 3, kRunningMeanOut = 4, kRunningVarOut = 5, kReluMask = 6
};

class CbrKernel final : public Kernel, public ReportsPath {
 public:
  CbrKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    cbar_ = node.op == "cbar";
    const size_t base_inputs = cbar_ ? 7 : 6;
    bit_mask_ = node.attrs.i("relu_mask", 0) != 0;
    outputs_ = bit_mask_ ? 7 : 6;
    expect_arity(node, base_inputs, base_inputs + 1, outputs_, outputs_);
    has_bias_ = node.inputs.size() == base_inputs + 1;
    const ir::Value &x = input_value(node, g, kX), &w = input_value(node, g, kW);
    const ir::Value &y = output_value(node, g, kY), &conv_out = output_value(node, g, kConvOut);
    io_ = elem_of(node, x, "the input");
    expect_dtype(node, w, x.dtype, "the weight");
    expect_dtype(node, y, x.dtype, "the output y");
    expect_dtype(node, conv_out, x.dtype, "conv_out");
    expect_shape(node, conv_out, y.shape, "conv_out");
    problem_ = conv_problem(node, x.shape, w.shape, y.shape, x.dtype);
    const Shape per_channel{problem_.K};
    const char* in_names[] = {"", "", "gamma", "beta", "running_mean", "running_var"};
    for (size_t i = kGamma; i <= kRunningVar; ++i) {
      in_types_[i] = elem_of(node, input_value(node, g, i), in_names[i]);
      expect_shape(node, input_value(node, g, i), per_channel, in_names[i]);
    }
    const char* out_names[] = {"", "", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out"};
    for (size_t o = kSavedMean; o <= kRunningVarOut; ++o) {
      out_types_[o] = elem_of(node, output_value(node, g, o), out_names[o]);
      expect_shape(node, output_value(node, g, o), per_channel, out_names[o]);
    }
    if (bit_mask_) {
      const ir::Value& mask = output_value(node, g, kReluMask);
      if (mask.dtype != DType::i32 || mask.shape != relu_mask_shape(y.shape))
        fail(node, "the relu mask must be i32 " + shape_str(relu_mask_shape(y.shape)));
      if (y.shape.back() % 8 != 0) fail(node, "a packed relu mask needs a multiple of 8 output channels");
      mask_row_bytes_ = relu_mask_words(y.shape.back()) * 4;
    }
    if (cbar_) {
      const ir::Value& r = input_value(node, g, kResidual);
      expect_dtype(node, r, x.dtype, "the residual");
      expect_shape(node, r, y.shape, "the residual");
    }
    ConvEpilogue bias_only;
    if (has_bias_) {
      const ir::Value& b = input_value(node, g, node.inputs.size() - 1);
      elem_of(node, b, "the bias");
      if (b.dtype != x.dtype && b.dtype != DType::f32)
        fail(node, "the bias '" + b.name + "' is " + std::string(dtype_name(b.dtype)) + "; it must be f32 or " +
                       std::string(dtype_name(x.dtype)) + " like the input");
      expect_shape(node, b, per_channel, "the bias");
      bias_only.bias = true;
      bias_only.bias_dtype = b.dtype;
    }
    eps_ = node.attrs.f("eps", 1e-5);
    momentum_ = node.attrs.f("momentum", 0.1);
    if (!(eps_ > 0)) fail(node, "attribute eps must be positive");
    if (problem_.output_rows() < 2)
      fail(node, "training batchnorm needs more than one value per channel (N·P·Q = " +
                     std::to_string(problem_.output_rows()) + "); use a larger batch");

    WorkspaceLayout layout;
    FpropFusion with_stats;
    with_stats.bias = bias_only.bias;
    with_stats.bias_dtype = bias_only.bias_dtype;
    with_stats.genstats = true;
    GraphBuild stats = cached_graph(ctx, fprop_graph(problem_, with_stats));
    // Autotuned: cuDNN's fused statistics are not always cheaper than the plain convolution's
    // best engine plus one channel-sums pass (some shapes only have slow genstats engines).
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
    if (stats.graph) {
      stats_graph_ = stats.graph;
      cudnn_offset_ = layout.add(stats_graph_->workspace_bytes());
      path_ = "one cuDNN graph: " + with_stats.describe() + ", then finalize and apply kernels" + timing;
    } else {
      conv_.emplace(node, problem_, bias_only, ctx, layout);
      partials_offset_ = layout.add(device::channel_sums_scratch_bytes(problem_.output_rows(), problem_.K));
      path_ = conv_->path() + ", channel-sums kernel (genstats " +
              (stats.failure.rfind("slower", 0) == 0 ? stats.failure : "refused: " + stats.failure) +
              "), then finalize and apply kernels";
      if (verbose()) verbose_note("node '" + node.name + "': " + path_);
    }
    const size_t channel_bytes = static_cast<size_t>(problem_.K) * sizeof(float);
    sum_offset_ = layout.add(channel_bytes);
    sq_sum_offset_ = layout.add(channel_bytes);
    scale_offset_ = layout.add(channel_bytes);
    shift_offset_ = layout.add(channel_bytes);
    ctx.reserve_workspace(0, layout.total());
    inputs_ = node.inputs.size();
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
  bool fell_back() const override { return !stats_graph_; }
  std::string path() const override { return path_; }
  std::string implementation() const override { return path_; }

 private:
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

  void enqueue(const KernelArgs& a) {
    void* ws = ctx_->workspace(0);
    const void* bias = has_bias_ ? a.in.back().data : nullptr;
    void* conv_out = a.out[kConvOut].data;
    float* sum = at_offset<float>(ws, sum_offset_);
    float* sq_sum = at_offset<float>(ws, sq_sum_offset_);
    const int64_t rows = problem_.output_rows(), K = problem_.K;

    if (stats_graph_) {
      std::array<void*, kMaxGraphUid + 1> ptr{};
      ptr[conv_uid::x] = a.in[kX].data;
      ptr[conv_uid::w] = a.in[kW].data;
      ptr[conv_uid::bias] = const_cast<void*>(bias);
      ptr[conv_uid::y] = conv_out;
      ptr[conv_uid::sum] = sum;
      ptr[conv_uid::sq_sum] = sq_sum;
      stats_graph_->execute(ctx_->cudnn(), ptr, at_offset(ws, cudnn_offset_));
    } else {
      ConvForward::Pointers p;
      p.x = a.in[kX].data;
      p.w = a.in[kW].data;
      p.bias = bias;
      p.y = conv_out;
      conv_->run(p, ws, *ctx_);
      device::launch_channel_sums(io_, conv_out, rows, K, at_offset<float>(ws, partials_offset_), sum, sq_sum,
                                  ctx_->stream());
    }

    device::BnFinalizeArgs f;
    f.sum = sum;
    f.sq_sum = sq_sum;
    f.count = rows;
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
    f.scale = at_offset<float>(ws, scale_offset_);
    f.shift = at_offset<float>(ws, shift_offset_);
    device::launch_bn_finalize(f, ctx_->stream());

    device::ChannelAffineArgs apply;
    apply.io = io_;
    apply.x = conv_out;
    apply.scale = f.scale;
    apply.shift = f.shift;
    apply.shift_type = device::ElemType::f32;
    apply.residual = cbar_ ? a.in[kResidual].data : nullptr;
    apply.y = a.out[kY].data;
    apply.rows = rows;
    apply.channels = K;
    apply.relu = true;
    if (bit_mask_) {
      apply.mask = a.out[kReluMask].data;
      apply.mask_row_bytes = mask_row_bytes_;
    }
    device::launch_channel_affine(apply, ctx_->stream());
  }

  CudaContext* ctx_;
  bool cbar_ = false, has_bias_ = false, bit_mask_ = false;
  size_t outputs_ = 6;
  int64_t mask_row_bytes_ = 0;
  device::ElemType io_ = device::ElemType::f32;
  std::array<device::ElemType, 6> in_types_{}, out_types_{};
  ConvProblem problem_;
  double eps_ = 1e-5, momentum_ = 0.1;
  std::shared_ptr<const CudnnGraph> stats_graph_;  // conv [+ bias] + genstats, when cuDNN builds it
  std::optional<ConvForward> conv_;                // otherwise: the forward convolution alone
  size_t cudnn_offset_ = 0, partials_offset_ = 0;
  size_t sum_offset_ = 0, sq_sum_offset_ = 0, scale_offset_ = 0, shift_offset_ = 0;
  size_t inputs_ = 0;
  std::string path_;
};

}  // namespace

void register_cbr_kernels() {
  add_kernel<CbrKernel>("cbr");
  add_kernel<CbrKernel>("cbar");
}

}  // namespace trident::cuda
