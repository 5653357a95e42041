// conv2d_epilogue in int8 on the "cpu" backend: oneDNN's u8/s8 convolution (VNNI where the CPU
// has it). Each run quantizes the f32 input into the executable's scratch arena with the node's
// calibrated scale (one reorder), then convolves with s32 accumulation and writes f32 through
// the per-output-channel dequantization, the bias, the residual sum and the relu as post-ops.
// The weights are quantized per output channel (ops/int8_quant.h) and reordered into oneDNN's
// blocked layout once in prepare() where the executable promises constant weights, else every
// run; oneDNN 2 fixes output scales when a primitive is built, so the convolution is rebuilt
// then too (only when the scales changed). The result equals the op's decomposition (quantize_dequantize on both operands, then
// the f32 epilogue) up to the order of the f32 sums.
#include "backends/cpu/int8_conv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "ops/conv_stages.h"
#include "ops/int8_quant.h"

namespace trident::cpu {

namespace {

using dt = memory::data_type;

size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

class Int8ConvEpilogue final : public PrimitiveKernel {
 public:
  Int8ConvEpilogue(const ir::Node& node, const ir::Graph& g, const CpuContext& ctx)
      : PrimitiveKernel(node, g), stages_(ops::ConvStages::of(node)), post_(conv_post_ops(node, stages_)) {
    expect_f32(node, g);
    const Shape &xs = in_shape(node, g, 0), &ws = in_shape(node, g, 1), &ys = out_shape(node, g, 0);
    const DnnlWindow win = conv_window(node, xs, ws, ys);
    K_ = ws[0];
    per_k_ = numel(ws) / K_;
    const dt src_type = stages_.int8_unsigned ? dt::u8 : dt::s8;
    const memory::desc src_f32 = nhwc_md(xs);
    const memory::desc src_q(src_f32.dims(), src_type, Tag::nhwc);
    const memory::desc wei_f32 = conv_weights_md(ws, win.groups);
    user_weights_md_ = memory::desc(wei_f32.dims(), dt::s8, win.groups == 1 ? Tag::ohwi : Tag::gohwi);
    const memory::desc bias_md({K_}, dt::f32, Tag::a), dst = nhwc_md(ys);
    OnednnContext& onednn = OnednnContext::instance();
    const float scale = static_cast<float>(stages_.int8_input_scale);
    Signature sig("int8_conv");
    sig.add("x", xs).add("w", ws).add("groups", win.groups).add("stride", win.strides).add("dil", win.dilates)
        .add("pad_l", win.pad_l).add("pad_r", win.pad_r).add("unsigned", int64_t{stages_.int8_unsigned})
        .add("sum", int64_t{residual()}).add("relu", int64_t{stages_.relu}).add("relu_max", stages_.relu_max)
        .add("mid_grid", stages_.mid_quant.on ? stages_.mid_quant.scale : 0.0)
        .add("out_grid", stages_.out_quant.on ? stages_.out_quant.scale : 0.0)
        .add("activation", stages_.activation ? static_cast<int64_t>(stages_.activation_params.fn) + 1 : 0);

    // The input onto its grid: x · (1/scale), rounded to nearest even and saturated by the reorder.
    char scale_text[32];
    std::snprintf(scale_text, sizeof scale_text, "%a", static_cast<double>(scale));
    const CachedPrimitive quantize = onednn.get(sig.str() + "|quantize|" + scale_text, [&] {
      dnnl::primitive_attr attr = user_scratchpad_attr();
      attr.set_output_scales(0, {1.0f / scale});
      return dnnl::reorder::primitive_desc(onednn.engine(), src_f32, onednn.engine(), src_q, attr);
    });
    src_q_ = src_q;
    weight_key_ = sig.str() + "|weights";
    wei_any_ = memory::desc(wei_f32.dims(), dt::s8, Tag::any);
    bias_md_ = bias_md;
    dst_md_ = dst;
    win_ = win;
    bias_ = owned(bias_md);
    // oneDNN 2 takes a convolution's per-channel output scales only when it builds the primitive,
    // and they depend on the weights: it is built here with unit scales (so a shape oneDNN cannot
    // run fails now), and again when the weights are quantized.
    arena_ = ctx.scratch();
    input_bytes_ = round_up_64(src_q.get_size());
    build_convolution(std::vector<float>(static_cast<size_t>(K_), 1.0f));
    // The input onto its grid, at the arena's start (the reorder's own scratchpad after it).
    add_step(quantize, ScratchRef{arena_, input_bytes_})
        .view(DNNL_ARG_FROM, src_f32, in(0))
        .scratch(DNNL_ARG_TO, src_q, ScratchRef{arena_, 0});
    set_implementation(std::string("oneDNN int8 convolution (") + (stages_.int8_unsigned ? "u8" : "s8") +
                       " input, s8 weights per output channel, f32 output; " + conv_pd_.impl_info_str() + ")");
  }

  void prepare(const KernelArgs& args) override {
    if (!constant_weights_) return;
    check_views(args);
    quantize_weights(args);
  }

  void run(const KernelArgs& args) override {
    check_views(args);
    if (!constant_weights_ || !weights_ready_) quantize_weights(args);
    if (residual()) {
      const TensorView &r = args.in.back(), &y = args.out[0];
      if (r.data != y.data) std::memcpy(y.data, r.data, y.bytes());  // unless the plan aliased them
    }
    execute(args);  // the input's quantization
    OnednnContext& onednn = OnednnContext::instance();
    std::byte* arena = arena_->data();
    memory src(src_q_, onednn.engine(), arena), dst(dst_md_, onednn.engine(), args.out[0].data);
    std::unordered_map<int, memory> conv_args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_BIAS, bias_}, {DNNL_ARG_DST, dst}};
    const memory::desc pad = conv_pd_.scratchpad_desc();
    if (pad.get_size() > 0) conv_args[DNNL_ARG_SCRATCHPAD] = memory(pad, onednn.engine(), arena + input_bytes_);
    for (const Scalar& c : scalars_) conv_args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(c.index) | DNNL_ARG_SRC_1] = c.operand;
    try {
      conv_.execute(onednn.stream(), conv_args);
      onednn.stream().wait();
    } catch (const dnnl::error& e) {
      throw Error("the cpu backend's int8 convolution failed in oneDNN: " + std::string(e.what()));
    }
  }

 private:
  bool residual() const { return stages_.residual != ops::ConvStages::Residual::none; }

  void build_convolution(const std::vector<float>& output_scales) {
    dnnl::primitive_attr attr = user_scratchpad_attr();
    attr.set_output_scales(1 << 1, output_scales);
    dnnl::post_ops post;
    scalars_.clear();
    if (stages_.mid_quant.on) append_grid(post, stages_.mid_quant);
    append_post_ops(post, post_);
    if (stages_.out_quant.on) append_grid(post, stages_.out_quant);
    attr.set_post_ops(post);
    OnednnContext& onednn = OnednnContext::instance();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_q_,
                                      wei_any_, bias_md_, dst_md_, win_.strides, win_.dilates, win_.pad_l, win_.pad_r);
    conv_pd_ = dnnl::convolution_forward::primitive_desc(d, attr, onednn.engine());
    conv_ = dnnl::convolution_forward(conv_pd_);
    // Its scratchpad follows the quantized input in the arena, which grows before the next run
    // should a rebuilt primitive want more.
    arena_->reserve(input_bytes_ + conv_pd_.scratchpad_desc().get_size());
    if (!weights_ || weights_.get_desc() != conv_pd_.weights_desc()) {
      weights_ = owned(conv_pd_.weights_desc());
      weight_reorder_ = reorder_primitive(weight_key_, user_weights_md_, conv_pd_.weights_desc());
    }
  }

  // A QDQ model's pair as post-ops on the f32 value: v·(1/s), rounded to nearest even, clamped
  // to the grid's levels, times s (ops/int8_quant.h's int8_level, in the same f32 steps). The
  // factors and bounds are binary post-ops on one-element tensors: oneDNN 2.6's jit convolution
  // gives every eltwise post-op of one algorithm the parameters of the first, so two linear or
  // clip steps in one chain cannot carry their own.
  void append_grid(dnnl::post_ops& post, const ops::ConvStages::Grid& q) {
    const ops::Int8Grid grid = ops::int8_grid(q.is_unsigned, static_cast<int>(q.zero_point));
    const float s = static_cast<float>(q.scale);
    append_scalar(post, dnnl::algorithm::binary_mul, 1.0f / s);
    post.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
    append_scalar(post, dnnl::algorithm::binary_max, grid.lo);
    append_scalar(post, dnnl::algorithm::binary_min, grid.hi);
    append_scalar(post, dnnl::algorithm::binary_mul, s);
  }

  void append_scalar(dnnl::post_ops& post, dnnl::algorithm op, float value) {
    const memory::desc one({1, 1, 1, 1}, dt::f32, Tag::abcd);
    scalars_.push_back({post.len(), value, owned(one)});
    static_cast<float*>(scalars_.back().operand.get_data_handle())[0] = value;
    post.append_binary(op, one);
  }

  // Per output channel: the s8 weights, the dequantization scale input·weight, and the bias
  // divided by it (oneDNN 2's int8 convolution adds the bias before its output scales).
  void quantize_weights(const KernelArgs& args) {
    const float* w = args.in[1].as<const float>();
    const float* b = stages_.bias ? args.in[2].as<const float>() : nullptr;
    std::vector<int8_t> q(static_cast<size_t>(K_ * per_k_));
    std::vector<float> scales(static_cast<size_t>(K_));
    auto* bias = static_cast<float*>(bias_.get_data_handle());
    for (int64_t k = 0; k < K_; ++k) {
      const float* row = w + k * per_k_;
      float absmax = 0;
      for (int64_t i = 0; i < per_k_; ++i) absmax = std::max(absmax, std::fabs(row[i]));
      const float ws = ops::int8_scale(absmax, false), inverse = 1.0f / ws;
      for (int64_t i = 0; i < per_k_; ++i)
        q[static_cast<size_t>(k * per_k_ + i)] = static_cast<int8_t>(ops::int8_level(row[i], inverse, ops::kWeightGrid));
      scales[k] = static_cast<float>(stages_.int8_input_scale) * ws;
      bias[k] = b ? b[k] / scales[k] : 0.0f;
    }
    try {
      if (scales != built_scales_) build_convolution(scales);
    } catch (const dnnl::error& e) {
      throw Error("oneDNN could not build the int8 convolution for these weights' scales: " + std::string(e.what()));
    }
    built_scales_ = scales;
    weights_ready_ = true;
    OnednnContext& onednn = OnednnContext::instance();
    memory user(user_weights_md_, onednn.engine(), q.data());
    std::unordered_map<int, memory> reorder_args{{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, weights_}};
    const memory::desc pad = weight_reorder_.pd.scratchpad_desc();
    memory scratchpad;
    if (pad.get_size() > 0) {
      scratchpad = owned(pad);
      reorder_args[DNNL_ARG_SCRATCHPAD] = scratchpad;
    }
    try {
      weight_reorder_.prim.execute(onednn.stream(), reorder_args);
      onednn.stream().wait();
    } catch (const dnnl::error& e) {
      throw Error("the cpu backend could not quantize the weights of an int8 convolution: " + std::string(e.what()));
    }
  }

  ops::ConvStages stages_;
  ConvPostOps post_;  // the residual sum and the relu, clip or activation after the mid grid
  struct Scalar {  // a binary post-op's one-element operand
    int index;
    float value;
    memory operand;
  };
  std::vector<Scalar> scalars_;
  int64_t K_ = 0, per_k_ = 0;
  DnnlWindow win_;
  memory::desc user_weights_md_, src_q_, wei_any_, bias_md_, dst_md_;
  std::string weight_key_;
  dnnl::convolution_forward::primitive_desc conv_pd_;
  dnnl::convolution_forward conv_;
  std::vector<float> built_scales_;
  bool weights_ready_ = false;
  memory weights_, bias_;
  CachedPrimitive weight_reorder_;
  std::shared_ptr<ScratchArena> arena_;
  size_t input_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> make_int8_conv_epilogue(const ir::Node& node, const ir::Graph& g, const CpuContext& ctx) {
  return std::make_unique<Int8ConvEpilogue>(node, g, ctx);
}

}  // namespace trident::cpu
