// Inference in int8: convolutions read their input and weights on int8 grids (ops/int8_quant.h).
//
//   calibrate:  conv2d / conv2d_epilogue            ⇒ its input is also a graph output
//   quantize:   conv2d_epilogue {…}   + a range     ⇒ conv2d_epilogue {…, int8_input_scale s}
//               conv2d (x, w, b?)     + a range     ⇒ conv2d_epilogue {has_bias?, int8_input_scale s}
//   a QDQ model (stage off): conv2d(quantize_dequantize(x; s, no zero point), …)
//                                                   ⇒ conv2d_epilogue {…, int8_input_scale s}(x, …)
//
// Runs after fold_bn and fuse_conv_epilogue, so the batchnorm is already in the weights and the
// bias, residual add and relu are already the convolution's epilogue, and int8 covers them in
// one kernel. The output stays f32 (the next layer quantizes its own input), so every other op
// runs as before. A convolution without a range, or whose input is the image itself (≤ 4
// channels: the most sensitive layer, and the one int8 saves least on), stays f32 with the
// reason in `trident explain`.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "ops/conv_stages.h"
#include "ops/int8_quant.h"
#include "passes/pass.h"

namespace trident::passes {

namespace {

constexpr int64_t kMinInputChannels = 5;

bool is_convolution(const ir::Node& n) { return n.op == "conv2d" || n.op == "conv2d_epilogue"; }

// Why the convolution stays f32 before any range is looked at, or "".
std::string structural_refusal(const ir::Graph& g, const ir::Node& n) {
  const ir::Value& x = g.value(n.inputs[0]);
  if (x.dtype != DType::f32) return "its input is " + std::string(dtype_name(x.dtype)) + ", int8 quantizes f32";
  if (x.shape.size() == 4 && x.shape[3] < kMinInputChannels)
    return "its input has " + std::to_string(x.shape[3]) +
           " channels (the image itself): the first layer stays f32, where int8 costs the most accuracy and saves "
           "the least time";
  return {};
}

void quantize(ir::Node& n, double scale, bool is_unsigned) {
  if (n.op == "conv2d") {
    n.op = "conv2d_epilogue";
    n.attrs.set("has_bias", int64_t{n.inputs.size() == 3});
    n.attrs.set("residual", int64_t{0});
    n.attrs.set("relu", int64_t{0});
  }
  n.attrs.set("int8_input_scale", scale);
  n.attrs.set("int8_unsigned", int64_t{is_unsigned});
}

// The quantize_dequantize node (an imported QuantizeLinear → DequantizeLinear pair) whose
// output the convolution reads, or nullptr.
const ir::Node* model_quantization(const ir::Graph& g, const ir::Node& conv) {
  const int producer = g.value(conv.inputs[0]).producer;
  if (producer < 0 || g.node(producer).op != "quantize_dequantize") return nullptr;
  return &g.node(producer);
}

// Where a QDQ model quantizes the convolution's input: the convolution reads x itself on that
// grid (the quantize_dequantize stays only for its other readers; dce drops it otherwise).
void take_model_quantization(ir::Graph& g, PassContext& ctx, ir::Node& n) {
  const ir::Node* q = model_quantization(g, n);
  if (!q) return;
  const std::string pattern = n.op + " in int8";
  std::string reason = structural_refusal(g, n);
  const int64_t zero_point = q->attrs.i("zero_point", 0);
  const bool is_unsigned = q->attrs.i("unsigned", 0) != 0;
  // s8 with zero point −128 is u8 from 0, and u8 with 128 is s8: the same grid of values.
  const bool as_unsigned = is_unsigned ? zero_point == 0 : zero_point == -128;
  const bool as_signed = is_unsigned ? zero_point == 128 : zero_point == 0;
  if (reason.empty() && !as_unsigned && !as_signed)
    reason = "the model quantizes its input with zero point " + std::to_string(zero_point) +
             " (an asymmetric grid), which trident's int8 convolution does not read; it runs in f32 on that grid";
  if (!reason.empty()) {
    ctx.rejections.push_back({"quantize_int8", pattern, n.name, reason});
    return;
  }
  const double scale = q->attrs.f("scale");
  n.inputs[0] = q->inputs[0];
  quantize(n, scale, as_unsigned);
  ctx.fusions.push_back({"quantize_int8", pattern, n.name, {q->name, n.name}});
}

}  // namespace

void quantize_int8(ir::Graph& g, PassContext& ctx) {
  const Int8Options& opt = ctx.options.int8;
  for (int id : std::vector<int>(g.order())) {
    ir::Node& n = g.node(id);
    if (opt.stage != Int8Options::Stage::off && n.op == "quantize_dequantize")
      throw Error("the model is quantized already (its QuantizeLinear → DequantizeLinear pairs give the scales): "
                  "run it without --precision int8 and --calibration");
    if (!is_convolution(n)) continue;
    if (opt.stage == Int8Options::Stage::off) {
      take_model_quantization(g, ctx, n);
      continue;
    }
    const std::string pattern = n.op + " in int8";
    std::string reason = structural_refusal(g, n);
    const std::string& input = g.value(n.inputs[0]).name;
    if (opt.stage == Int8Options::Stage::calibrate) {
      const std::vector<int>& outs = g.outputs();
      if (reason.empty() && std::find(outs.begin(), outs.end(), n.inputs[0]) == outs.end()) g.mark_output(n.inputs[0]);
      continue;
    }
    const auto range = opt.ranges.find(input);
    if (reason.empty() && range == opt.ranges.end())
      reason = "the calibration has no range for its input '" + input + "'";
    else if (reason.empty() && !(range->second.threshold > 0))
      reason = "its input '" + input + "' was zero on every calibration batch";
    if (!reason.empty()) {
      ctx.rejections.push_back({"quantize_int8", pattern, n.name, reason});
      continue;
    }
    quantize(n, static_cast<double>(ops::int8_scale(range->second.threshold, range->second.non_negative)),
             range->second.non_negative);
    ctx.fusions.push_back({"quantize_int8", pattern, n.name, {n.name}});
  }
}

}  // namespace trident::passes
