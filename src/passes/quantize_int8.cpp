// Inference in int8: convolutions read their input and weights on int8 grids (ops/int8_quant.h).
//
//   calibrate:  conv2d / conv2d_epilogue            ⇒ its input is also a graph output
//   quantize:   conv2d_epilogue {…}   + a range     ⇒ conv2d_epilogue {…, int8_input_scale s}
//               conv2d (x, w, b?)     + a range     ⇒ conv2d_epilogue {has_bias?, int8_input_scale s}
//
// Runs after fold_bn and fuse_conv_epilogue, so the batchnorm is already in the weights and the
// bias, residual add and relu are already the convolution's epilogue, and int8 covers them in
// one kernel. The output stays f32 (the next layer quantizes its own input), so every other op
// runs as before. A convolution without a range, or whose input is the image itself (≤ 4
// channels: the most sensitive layer, and the one int8 saves least on), stays f32 with the
// reason in `trident explain`.
#include <algorithm>
#include <string>

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

void quantize(ir::Node& n, const Int8Options::Range& r) {
  if (n.op == "conv2d") {
    n.op = "conv2d_epilogue";
    n.attrs.set("has_bias", int64_t{n.inputs.size() == 3});
    n.attrs.set("residual", int64_t{0});
    n.attrs.set("relu", int64_t{0});
  }
  n.attrs.set("int8_input_scale", static_cast<double>(ops::int8_scale(r.threshold, r.non_negative)));
  n.attrs.set("int8_unsigned", int64_t{r.non_negative});
}

}  // namespace

void quantize_int8(ir::Graph& g, PassContext& ctx) {
  const Int8Options& opt = ctx.options.int8;
  for (int id : std::vector<int>(g.order())) {
    ir::Node& n = g.node(id);
    if (!is_convolution(n)) continue;
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
    quantize(n, range->second);
    ctx.fusions.push_back({"quantize_int8", pattern, n.name, {n.name}});
  }
}

}  // namespace trident::passes
