// Reading a fused convolution's stages from its op and attributes (ops/conv_stages.h).
#include "ops/conv_stages.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/cbr_operands.h"

namespace trident::ops {

namespace {

ConvStages::Grid grid_attrs(const ir::Node& n, const std::string& prefix) {
  ConvStages::Grid g;
  g.on = n.attrs.has(prefix + "_scale");
  g.scale = n.attrs.f(prefix + "_scale", 0.0);
  g.is_unsigned = n.attrs.i(prefix + "_unsigned", 0) != 0;
  g.zero_point = n.attrs.i(prefix + "_zero_point", 0);
  return g;
}

std::string grid_text(const ConvStages::Grid& g) {
  std::ostringstream out;
  out << " → " << (g.is_unsigned ? "u8" : "s8") << " grid (scale " << g.scale;
  if (g.zero_point != 0) out << ", zero point " << g.zero_point;
  out << ")";
  return out.str();
}

}  // namespace

void ConvStages::set_grid(ir::Attrs& attrs, const std::string& prefix, const Grid& g) {
  attrs.set(prefix + "_scale", g.scale);
  attrs.set(prefix + "_unsigned", int64_t{g.is_unsigned});
  attrs.set(prefix + "_zero_point", g.zero_point);
}

bool ConvStages::is_fused_convolution(const std::string& op) {
  return op == "cbr" || op == "cbar" || op == "conv_bn_stats" || op == "conv2d_epilogue";
}

ConvStages ConvStages::of(const ir::Node& n) {
  if (!is_fused_convolution(n.op)) throw Error("'" + n.name + "' (" + n.op + ") is not a fused convolution");
  ConvStages s;
  s.clipped = n.attrs.has("relu_max");
  s.relu_max = n.attrs.f("relu_max", 0.0);
  if (n.op == "conv2d_epilogue") {
    s.bias = n.attrs.i("has_bias", 0) != 0;
    s.residual = n.attrs.i("residual", 0) != 0 ? Residual::plain : Residual::none;
    s.relu = n.attrs.i("relu", 0) != 0;
    s.int8 = n.attrs.has("int8_input_scale");
    s.int8_input_scale = n.attrs.f("int8_input_scale", 0.0);
    s.int8_unsigned = n.attrs.i("int8_unsigned", 0) != 0;
    s.mid_quant = grid_attrs(n, "mid_quant");
    s.out_quant = grid_attrs(n, "out_quant");
    s.activation = n.attrs.has("activation");
    if (s.activation) {
      ir::Attrs a;
      a.set("fn", n.attrs.s("activation"));
      a.set("alpha", n.attrs.f("activation_alpha", 1.0 / 6.0));
      a.set("beta", n.attrs.f("activation_beta", 0.5));
      s.activation_params = ops::activation_params(a);
    }
    return s;
  }
  const CbrOperands o = CbrOperands::of(n);
  s.input_affine = has_prologue(n);
  s.bias = o.bias >= 0;
  s.bias_cancelled = has_cancelled_bias(n);
  s.batch_statistics = true;
  const bool stats_only = n.op == "conv_bn_stats";
  s.apply_affine = !stats_only;
  s.exact_affine = stats_only && n.attrs.i("exact_affine", 0) != 0;
  if (n.op == "cbar") s.residual = o.residual_affine >= 0 ? Residual::with_affine : Residual::plain;
  s.relu = !stats_only;
  s.bit_mask = n.attrs.i("relu_mask", 0) != 0;
  return s;
}

std::string ConvStages::describe() const {
  std::ostringstream out;
  if (input_affine) out << "input affine+relu → ";
  if (int8) out << (int8_unsigned ? "u8" : "s8") << " input, s8 weights → ";
  out << "conv";
  if (bias) out << (bias_cancelled ? " → bias (cancelled by the batch mean)" : " → bias");
  if (batch_statistics) out << " → batch statistics";
  if (batch_statistics) out << (apply_affine ? " → affine" : exact_affine ? " → exact affine out" : " → affine out");
  if (mid_quant.on) out << grid_text(mid_quant);
  if (residual == Residual::plain) out << " → add residual";
  if (residual == Residual::with_affine) out << " → add residual·affine";
  if (relu) {
    if (clipped) {
      std::ostringstream bound;
      bound << relu_max;
      out << " → clip(0, " << bound.str() << ")";
    } else {
      out << " → relu";
    }
  }
  if (activation) out << " → " << activation_fn_name(activation_params.fn);
  if (out_quant.on) out << grid_text(out_quant);
  if (bit_mask) out << " → bit mask";
  return out.str();
}

}  // namespace trident::ops
