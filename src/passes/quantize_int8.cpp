// Inference in int8: convolutions read their input and weights on int8 grids (ops/int8_quant.h).
//
//   calibrate:  conv2d / conv2d_epilogue            ⇒ its input is also a graph output
//   quantize:   conv2d_epilogue {…}   + a range     ⇒ conv2d_epilogue {…, int8_input_scale s}
//               conv2d (x, w, b?)     + a range     ⇒ conv2d_epilogue {has_bias?, int8_input_scale s}
//   a QDQ model (stage off): passes/quantize_int8_qdq.cpp
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
#include "passes/quantize_int8_detail.h"

namespace trident::passes {

using int8_detail::is_convolution;
using int8_detail::quantize;
using int8_detail::structural_refusal;

void quantize_int8(ir::Graph& g, PassContext& ctx) {
  const Int8Options& opt = ctx.options.int8;
  if (opt.stage == Int8Options::Stage::off) return quantize_int8_from_pairs(g, ctx);
  for (int id : std::vector<int>(g.order())) {
    ir::Node& n = g.node(id);
    if (n.op == "quantize_dequantize")
      throw Error("the model is quantized already (its QuantizeLinear → DequantizeLinear pairs give the scales): "
                  "run it without --precision int8 and --calibration");
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
    quantize(n, static_cast<double>(ops::int8_scale(range->second.threshold, range->second.non_negative)),
             range->second.non_negative);
    ctx.fusions.push_back({"quantize_int8", pattern, n.name, {n.name}});
  }
}

}  // namespace trident::passes
