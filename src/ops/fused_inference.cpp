// Inference-side fused ops. fold_batchnorm computes the folded convolution weights once
// (it reads only parameters and state, so the executable hoists it out of the step);
// conv2d_epilogue is a convolution whose bias, residual add and relu happen before the
// output is written.
#include <cmath>

#include "ops/activation.h"
#include "ops/conv_stages.h"
#include "ops/op_helpers.h"
#include "ops/window.h"
#include "ops/norm_params.h"

namespace trident::ops {

namespace {
// conv2d_epilogue inputs: x, w, [b if has_bias], [residual if residual].
int bias_of(const Node& n) { return ConvStages::of(n).bias ? n.inputs.at(2) : -1; }
int residual_of(const Node& n) {
  return ConvStages::of(n).residual != ConvStages::Residual::none ? n.inputs.back() : -1;
}
}  // namespace

void register_fused_inference_ops() {
  ir::OpDef fold = op_def("fold_batchnorm",
                          {"w", "gamma", "beta", "running_mean", "running_var", "b?"},
                          {"w_folded", "b_folded"},
                          "W' = W·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β, per output channel");
  fold.infer = [](const Node& n, const Graph& g) {
    const auto& w = in_value(g, n, 0);
    if (w.shape.empty()) throw Error("the weight must have an output-channel axis");
    const Shape k{w.shape[0]};
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (in_value(g, n, i).shape != k)
        throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(k));
    NormParams::of(n).check();
    return std::vector<TypeInfo>{{w.shape, w.dtype}, {k, w.dtype}};
  };
  fold.f32_inputs = {"w", "gamma", "beta", "running_mean", "running_var", "b?"};  // folds in f32; readers cast
  ir::OpRegistry::add(fold);

  ir::OpDef epi = op_def("conv2d_epilogue", {"x", "w", "b (has_bias)", "residual (residual)"}, {"y"},
                         "conv2d + bias (+ residual add) (+ relu, or relu clipped at relu_max: ReLU6, or an activation) in one "
                         "kernel; in int8 with int8_input_scale");
  epi.variadic = true;
  epi.infer = [](const Node& n, const Graph& g) {
    const ConvStages stages = ConvStages::of(n);
    const size_t want = 2 + (stages.bias ? 1 : 0) + (stages.residual != ConvStages::Residual::none ? 1 : 0);
    if (n.inputs.size() != want)
      throw Error("expects " + std::to_string(want) + " inputs for its has_bias/residual attributes, got " +
                  std::to_string(n.inputs.size()));
    Node conv;
    conv.op = "conv2d";
    conv.inputs = {n.inputs[0], n.inputs[1]};
    if (bias_of(n) >= 0) conv.inputs.push_back(bias_of(n));
    conv.attrs = conv_window_attrs(n.attrs);
    const TypeInfo y = ir::OpRegistry::get("conv2d").infer(conv, g).at(0);
    if (stages.clipped && (!stages.relu || !(stages.relu_max > 0)))
      throw Error("attribute relu_max needs relu = 1 and a positive value");
    if (stages.activation && (stages.relu || stages.activation_params.fn == ActivationFn::clip))
      throw Error("attribute activation takes the relu's place: not with relu, and not clip (relu_max)");
    if (stages.int8 && (!(stages.int8_input_scale > 0) || !std::isfinite(stages.int8_input_scale)))
      throw Error("attribute int8_input_scale must be positive and finite");
    for (const ConvStages::Grid* q : {&stages.mid_quant, &stages.out_quant})
      if (q->on && (!stages.int8 || !(q->scale > 0) || !std::isfinite(q->scale)))
        throw Error("an output grid (mid_quant, out_quant) needs int8 and a positive, finite scale");
    if (stages.mid_quant.on && stages.residual == ConvStages::Residual::none)
      throw Error("mid_quant is the grid before the residual add, which this node does not have");
    if (stages.int8 && (g.value(n.inputs[0]).dtype != DType::f32 || g.value(n.inputs[1]).dtype != DType::f32))
      throw Error("an int8 convolution takes f32 input and weights (it quantizes them itself)");
    if (residual_of(n) >= 0 && g.value(residual_of(n)).shape != y.shape)
      throw Error("the residual " + shape_str(g.value(residual_of(n)).shape) +
                  " must match the convolution output " + shape_str(y.shape));
    return std::vector<TypeInfo>{y};
  };
  // inplace_residual: y takes the residual's buffer (reuse_residual_buffer checked that the
  // residual has no later reader), so the residual add needs no copy.
  epi.aliases = [](const Node& n) {
    if (!n.attrs.i("inplace_residual", 0)) return std::vector<std::pair<int, int>>{};
    return std::vector<std::pair<int, int>>{{0, static_cast<int>(n.inputs.size()) - 1}};
  };
  epi.macs = [](const Node& n, const Graph& g) {
    const Shape& w = in_value(g, n, 1).shape;
    return numel(g.value(n.outputs[0]).shape) * w[1] * w[2] * w[3];
  };
  // In int8, the input and the weights pass through their int8 grids first (ops/quantize.cpp).
  epi.decompose = [](Graph& g, const Node& n) {
    const ConvStages stages = ConvStages::of(n);
    std::vector<int> in{n.inputs[0], n.inputs[1]};
    if (stages.int8) {
      in[0] = g.add_node1("quantize_dequantize", {in[0]},
                          {{"scale", stages.int8_input_scale}, {"unsigned", int64_t{stages.int8_unsigned}}},
                          n.name + ".quantize_x");
      in[1] = g.add_node1("quantize_dequantize", {in[1]}, {{"per_channel", int64_t{1}}}, n.name + ".quantize_w");
    }
    if (bias_of(n) >= 0) in.push_back(bias_of(n));
    int y = g.add_node1("conv2d", in, conv_window_attrs(n.attrs),
                        n.name + ".conv");
    auto snap = [&](const ConvStages::Grid& q, const char* what) {
      return g.add_node1("quantize_dequantize", {y},
                         {{"scale", q.scale}, {"unsigned", int64_t{q.is_unsigned}}, {"zero_point", q.zero_point}},
                         n.name + what);
    };
    if (stages.mid_quant.on) y = snap(stages.mid_quant, ".quantize_mid");
    if (residual_of(n) >= 0) y = g.add_node1("add", {y, residual_of(n)}, {}, n.name + ".add");
    if (stages.clipped)
      y = g.add_node1("clip", {y}, {{"min", 0.0}, {"max", stages.relu_max}}, n.name + ".clip");
    else if (stages.relu)
      y = g.add_node1("relu", {y}, {}, n.name + ".relu");
    else if (stages.activation)
      y = g.add_node1("activation", {y},
                      {{"fn", std::string(activation_fn_name(stages.activation_params.fn))},
                       {"alpha", static_cast<double>(stages.activation_params.alpha)},
                       {"beta", static_cast<double>(stages.activation_params.beta)}},
                      n.name + ".activation");
    if (stages.out_quant.on) y = snap(stages.out_quant, ".quantize_out");
    return std::vector<int>{y};
  };
  epi.reads_conv_input = true;
  ir::OpRegistry::add(epi);
}

}  // namespace trident::ops
