// Op cases of the convolution family: conv2d (± bias), conv2d_backward_data, conv2d_backward_weight
// (± db), conv2d_epilogue, and the fused cbr/cbar/conv_bn_stats forward, ± the input prologue (also
// against their decompositions). Two
// sets of windows: odd geometries (strides, dilation, groups, depthwise, 7×7 stems) on small
// integers, exact in f32, per element; and the cuda kernels' shapes on reals in f32 and f16. f32
// runs on cuda's TF32 tensor cores, hence Row::Tf32.
#include "ops/conv_stages.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

struct Window {
  Shape x, w;
  std::vector<int64_t> stride{1, 1}, pad{0, 0}, dil{1, 1};
  int64_t groups = 1;
};

Attrs window_attrs(const Window& c) {
  return {{"stride", c.stride}, {"padding", c.pad}, {"dilation", c.dil}, {"groups", c.groups}};
}
Shape output_shape(const Window& c) { return inferred_shape("conv2d", {c.x, c.w}, window_attrs(c)); }

ir::Graph forward(const Window& c, bool bias, DType d) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", c.x, d), g.add_parameter("w", c.w, {}, d)};
  if (bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}, d));
  g.add_node1("conv2d", in, window_attrs(c), "conv");
  return g;
}

ir::Graph dgrad(const Window& c, DType d) {
  ir::Graph g;
  Attrs a = window_attrs(c);
  a.set("input_shape", c.x);
  g.add_node1("conv2d_backward_data", {g.add_input("dy", output_shape(c), d), g.add_parameter("w", c.w, {}, d)}, a,
              "dgrad");
  return g;
}

ir::Graph wgrad(const Window& c, bool bias, DType d) {
  ir::Graph g;
  Attrs a = window_attrs(c);
  a.set("weight_shape", c.w);
  a.set("has_bias", int64_t{bias});
  g.add_node("conv2d_backward_weight", {g.add_input("x", c.x, d), g.add_input("dy", output_shape(c), d)}, a, "wgrad");
  return g;
}

struct Epilogue {
  bool bias, residual, relu, in_place = false;
  double relu_max = 0;  // > 0: ReLU clipped there (ReLU6)
  double int8_scale = 0;  // > 0: int8, the input on this scale's grid
  bool int8_unsigned = false;
  // > 0: an imported QDQ model's pair before the residual (mid) / last (out), s8 with zero point
  // mid_zero_point; u8 from 0 at the end (the relu a quantizer folded into its grid)
  double mid_scale = 0, out_scale = 0;
  int64_t mid_zero_point = 0;
  const char* activation = nullptr;  // an activation in the relu's place (ops/conv_stages.h)
};

ir::Graph epilogue(const Window& c, const Epilogue& e, DType d) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", c.x, d), g.add_parameter("w", c.w, {}, d)};
  if (e.bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}, d));
  if (e.residual) in.push_back(g.add_input("residual", output_shape(c), d));
  Attrs a = window_attrs(c);
  a.set("has_bias", int64_t{e.bias});
  a.set("residual", int64_t{e.residual});
  a.set("relu", int64_t{e.relu});
  if (e.in_place) a.set("inplace_residual", int64_t{1});
  if (e.relu_max > 0) a.set("relu_max", e.relu_max);
  if (e.int8_scale > 0) {
    a.set("int8_input_scale", e.int8_scale);
    a.set("int8_unsigned", int64_t{e.int8_unsigned});
  }
  if (e.mid_scale > 0) ops::ConvStages::set_grid(a, "mid_quant", {true, e.mid_scale, false, e.mid_zero_point});
  if (e.out_scale > 0) ops::ConvStages::set_grid(a, "out_quant", {true, e.out_scale, true, 0});
  if (e.activation) a.set("activation", std::string(e.activation));
  g.add_node1("conv2d_epilogue", in, a, "epilogue");
  return g;
}

// cbr / cbar: inputs x, w, gamma, beta, running_mean, running_var, [residual], [b].
// bias_cancelled: the training batch mean cancels the bias (passes/cancel_conv_bias.cpp);
// relu_max > 0: the relu clipped there (ReLU6's cbr).
// prologue: the input is read through relu(x·scale + shift) of an affine "x_affine" (defer_bn_apply's
// form; conv_bn_stats is that form's statistics-only layer, its output the affine for the next).
ir::Graph fused(const std::string& op, const Window& c, bool bias, DType d, bool bias_cancelled = false,
                double relu_max = 0, bool prologue = false) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", c.x, d), g.add_parameter("w", c.w, {}, d)};
  const Shape ch{c.w[0]};
  for (const char* n : {"gamma", "beta", "running_mean", "running_var"}) in.push_back(g.add_parameter(n, ch, {}, d));
  if (op == "cbar") in.push_back(g.add_input("residual", output_shape(c), d));
  if (bias) in.push_back(g.add_parameter("b", ch, {}, d));
  ir::Attrs a{{"stride", c.stride}, {"padding", c.pad}, {"eps", 1e-5}, {"momentum", 0.1}};
  if (bias_cancelled) a.set("bias_cancelled", int64_t{1});
  if (relu_max > 0) a.set("relu_max", relu_max);
  if (prologue) {
    in.push_back(g.add_input("x_affine", {2, c.x[3]}));
    a.set("prologue", int64_t{1});
  }
  g.add_node(op, in, a, "block");
  return g;
}

// Small integers, exact in f32 on every backend: per element, two draws.
OpCase exact_case(std::string name, std::function<ir::Graph(DType)> build) {
  OpCase c = per_element_case(std::move(name), std::move(build), Fill::SmallInts);
  c.row = Row::Tf32;
  return c;
}

// Uniform reals in f32 and f16, relative to the tensor's scale.
OpCase real_case(std::string name, std::function<ir::Graph(DType)> build, uint64_t seed,
                 std::vector<DType> dtypes = kF32F16) {
  OpCase c = scaled_case(std::move(name), std::move(build), seed, std::move(dtypes));
  c.row = Row::Tf32;
  return c;
}

}  // namespace

void add_conv_cases(std::vector<OpCase>& cases) {
  struct Named {
    const char* name;
    Window w;
    bool bias;
  };
  // Odd geometries: forward, data and weight gradient, on small integers.
  const Named odd[] = {
      {"Pad1Bias", {{2, 7, 7, 4}, {8, 3, 3, 4}, {1, 1}, {1, 1}, {1, 1}, 1}, true},
      {"Stride2OddNoBias", {{2, 9, 11, 3}, {5, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1}, false},
      {"Dilation2", {{1, 10, 9, 4}, {6, 3, 3, 4}, {1, 1}, {2, 2}, {2, 2}, 1}, true},
      {"Groups2", {{2, 8, 8, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2}, true},
      {"Depthwise", {{2, 6, 6, 8}, {8, 3, 3, 1}, {1, 1}, {1, 1}, {1, 1}, 8}, false},
      {"Pointwise1x1Stride2", {{3, 8, 8, 16}, {32, 1, 1, 16}, {2, 2}, {0, 0}, {1, 1}, 1}, false},
      {"MixedHW", {{2, 9, 11, 4}, {6, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2}, true},
      {"Stem7x7Stride2", {{2, 17, 17, 3}, {8, 7, 7, 3}, {2, 2}, {3, 3}, {1, 1}, 1}, false},
      {"Wide3x3", {{4, 14, 14, 32}, {64, 3, 3, 32}, {1, 1}, {1, 1}, {1, 1}, 1}, true},
  };
  for (const Named& n : odd) {
    const Window w = n.w;
    const bool bias = n.bias;
    cases.push_back(exact_case(std::string("conv2d_") + n.name, [=](DType d) { return forward(w, bias, d); }));
    cases.push_back(exact_case(std::string("conv2d_backward_data_") + n.name, [=](DType d) { return dgrad(w, d); }));
    cases.push_back(
        exact_case(std::string("conv2d_backward_weight_") + n.name, [=](DType d) { return wgrad(w, bias, d); }));
  }

  // The cuda kernels' windows: 3×3 pad 1, 1×1, stride 2, three input channels, groups 2, dilation
  // 2.
  const std::pair<const char*, Window> kernels[] = {
      {"k3_pad1", {{2, 8, 8, 16}, {32, 3, 3, 16}, {1, 1}, {1, 1}, {1, 1}, 1}},
      {"k1", {{2, 8, 8, 16}, {24, 1, 1, 16}, {1, 1}, {0, 0}, {1, 1}, 1}},
      {"k3_stride2", {{2, 9, 9, 8}, {16, 3, 3, 8}, {2, 2}, {1, 1}, {1, 1}, 1}},
      {"three_input_channels", {{2, 8, 8, 3}, {16, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1}},
      {"groups2", {{2, 8, 8, 16}, {32, 3, 3, 8}, {1, 1}, {1, 1}, {1, 1}, 2}},
      {"dilation2", {{1, 10, 10, 8}, {8, 3, 3, 8}, {1, 1}, {2, 2}, {2, 2}, 1}},
  };
  for (const auto& [name, window] : kernels) {
    const Window w = window;
    for (bool bias : {false, true}) {
      const std::string b = bias ? "_bias" : "";
      cases.push_back(real_case(
          "conv2d_" + std::string(name) + b, [=](DType d) { return forward(w, bias, d); }, 11));
      cases.push_back(real_case(
          "conv2d_backward_weight_" + std::string(name) + b, [=](DType d) { return wgrad(w, bias, d); }, 13));
    }
    cases.push_back(real_case(
        "conv2d_backward_data_" + std::string(name), [=](DType d) { return dgrad(w, d); }, 12));
  }
  const Window k3 = kernels[0].second;
  // bf16 on the first window.
  cases.push_back(
      real_case("conv2d_k3_pad1_bias_bf16", [=](DType d) { return forward(k3, true, d); }, 14, {DType::bf16}));
  cases.push_back(
      real_case("conv2d_backward_data_k3_pad1_bf16", [=](DType d) { return dgrad(k3, d); }, 15, {DType::bf16}));
  cases.push_back(real_case("conv2d_backward_weight_k3_pad1_bias_bf16", [=](DType d) { return wgrad(k3, true, d); }, 16,
                            {DType::bf16}));
  // The bias gradient's channel sums over many rows (several row blocks, rows not a multiple of a
  // block), K % 8 = 0 (16-byte path) and K = 10, 12 (the scalar path in f16).
  for (int64_t k : {int64_t{64}, int64_t{10}, int64_t{12}}) {
    const Window rows{{9, 31, 33, 8}, {k, 1, 1, 8}};
    cases.push_back(real_case(
        "conv2d_backward_weight_bias_rows_K" + std::to_string(k), [=](DType d) { return wgrad(rows, true, d); }, 61));
  }

  // conv2d_epilogue: odd geometries on small integers, so sum and relu post-ops must match per
  // element. Winograd stays off on cpu: its transforms round (and timing could pick it on a loaded
  // machine); CpuWinograd covers it.
  BackendContext::KernelOptions direct;
  direct.constant_weights = true;
  direct.backend.autotune = true;
  direct.backend.winograd = 0;
  struct NamedEpilogue {
    const char* name;
    Window w;
    Epilogue e;
  };
  const NamedEpilogue epilogues[] = {
      {"BiasResidualRelu", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, {true, true, true}},
      {"ResidualNoReluNoBias", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, {false, true, false}},
      {"BiasRelu", {{2, 7, 7, 4}, {6, 3, 3, 4}, {1, 1}, {1, 1}}, {true, false, true}},
      {"BiasOnly", {{2, 7, 7, 4}, {6, 3, 3, 4}, {1, 1}, {1, 1}}, {true, false, false}},
      {"Stride2ResidualRelu", {{2, 9, 9, 4}, {8, 3, 3, 4}, {2, 2}, {1, 1}}, {true, true, true}},
      {"Stride2ReluNoBias", {{3, 10, 10, 3}, {8, 3, 3, 3}, {2, 2}, {1, 1}}, {false, false, true}},
      {"Groups2ResidualRelu", {{2, 8, 8, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2}, {true, true, true}},
      {"Groups2Relu", {{2, 8, 8, 6}, {6, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2}, {false, false, true}},
      {"Pointwise1x1Residual", {{2, 6, 6, 16}, {16, 1, 1, 16}}, {false, true, true}},
      // ReLU6 (MobileNet's Conv -> Clip(0, 6)); small integers reach past 6, so the clip bites.
      {"BiasRelu6", {{2, 7, 7, 4}, {6, 3, 3, 4}, {1, 1}, {1, 1}}, {true, false, true, false, 6.0}},
      {"ResidualRelu6", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, {false, true, true, false, 6.0}},
  };
  for (const NamedEpilogue& n : epilogues) {
    const Window w = n.w;
    const Epilogue e = n.e;
    OpCase c = exact_case(std::string("conv2d_epilogue_") + n.name, [=](DType d) { return epilogue(w, e, d); });
    c.options["cpu"] = direct;
    cases.push_back(std::move(c));
    cases.push_back(
        decomposition_case(std::string("conv2d_epilogue_") + n.name, [=](DType d) { return epilogue(w, e, d); }));
  }
  // conv2d_epilogue in int8 (the CPU backends' form; cuda refuses it): reals on a grid a little
  // narrower than their range, so some saturate; u8 where the grid starts at 0, so the negative
  // ones clamp there. The integer kernel against cpu_ref's quantize_dequantize decomposition.
  const NamedEpilogue int8_epilogues[] = {
      {"Int8BiasResidualRelu", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, {true, true, true, false, 0, 0.9 / 127}},
      {"Int8U8BiasRelu", {{2, 7, 7, 16}, {6, 3, 3, 16}, {1, 1}, {1, 1}}, {true, false, true, false, 0, 0.9 / 255, true}},
      {"Int8Stride2NoBias", {{2, 9, 9, 8}, {8, 3, 3, 8}, {2, 2}, {1, 1}}, {false, false, false, false, 0, 0.5 / 127}},
      {"Int8Groups2Relu", {{2, 8, 8, 6}, {6, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2}, {false, false, true, false, 0, 1.0 / 127}},
      {"Int8Pointwise1x1Residual6", {{2, 6, 6, 16}, {16, 1, 1, 16}}, {true, true, true, false, 6.0, 0.8 / 255, true}},
      // A QDQ model's grids in the epilogue: before the residual (zero point 3) and last (u8).
      {"Int8GridsResidual", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}},
       {true, true, false, false, 0, 0.9 / 127, false, 0.37, 0.21, 3}},
      {"Int8GridOut1x1", {{2, 6, 6, 16}, {16, 1, 1, 16}}, {false, false, false, false, 0, 0.8 / 255, true, 0, 0.13}},
  };
  for (const NamedEpilogue& n : int8_epilogues) {
    const Window w = n.w;
    const Epilogue e = n.e;
    OpCase c = scaled_case(std::string("conv2d_epilogue_") + n.name, [=](DType d) { return epilogue(w, e, d); }, 71,
                           {DType::f32});
    c.backends = {"cpu", "cpu_ref"};
    cases.push_back(std::move(c));
    OpCase d = decomposition_case(std::string("conv2d_epilogue_") + n.name, [=](DType t) { return epilogue(w, e, t); });
    d.backends = {"cpu", "cpu_ref"};
    cases.push_back(std::move(d));
  }
  // An activation in the relu's place (EfficientNet's SiLU, MobileNet v3's hardswish; the CPU
  // backends' form: cuda's traits leave it out), reals in f32, also after an int8 convolution.
  for (const char* fn : {"silu", "sigmoid", "hardswish", "gelu", "gelu_tanh"}) {
    for (bool residual : {false, true}) {
      Epilogue e{true, residual, false};
      e.activation = fn;
      const Window w{{2, 7, 7, 8}, {6, 3, 3, 8}, {1, 1}, {1, 1}};
      const std::string name = std::string("conv2d_epilogue_Bias") + (residual ? "Residual" : "") + "_" + fn;
      OpCase c = scaled_case(name, [=](DType d) { return epilogue(w, e, d); }, 73, {DType::f32});
      c.backends = {"cpu", "cpu_ref"};
      c.options["cpu"] = direct;
      cases.push_back(std::move(c));
      OpCase d = decomposition_case(name, [=](DType t) { return epilogue(w, e, t); });
      d.backends = {"cpu", "cpu_ref"};
      cases.push_back(std::move(d));
    }
  }
  {
    Epilogue e{true, false, false, false, 0, 0.8 / 127};
    e.activation = "silu";
    const Window w{{2, 7, 7, 16}, {6, 3, 3, 16}, {1, 1}, {1, 1}};
    OpCase c = scaled_case("conv2d_epilogue_Int8BiasSilu", [=](DType d) { return epilogue(w, e, d); }, 71, {DType::f32});
    c.backends = {"cpu", "cpu_ref"};
    cases.push_back(std::move(c));
  }
  // Every attribute combination on the first cuda window, and the output in the residual's buffer.
  std::vector<Epilogue> combos;
  for (bool bias : {false, true})
    for (bool residual : {false, true})
      for (bool relu : {false, true}) combos.push_back({bias, residual, relu, false});
  combos.push_back({true, true, true, true});
  combos.push_back({false, true, false, true});
  combos.push_back({true, false, true, false, 6.0});  // ReLU6 in the cuDNN graph's relu
  combos.push_back({true, true, true, true, 6.0});    // in place: the channel-affine kernel clips
  for (const Epilogue& e : combos) {
    const std::string name = std::string(e.bias ? "bias" : "nobias") + (e.residual ? "_residual" : "") +
                             (e.relu ? "_relu" : "") + (e.relu_max > 0 ? "6" : "") + (e.in_place ? "_inplace" : "");
    cases.push_back(real_case(
        "conv2d_epilogue_k3_pad1_" + name, [=](DType d) { return epilogue(k3, e, d); }, 21));
  }

  // cbr / cbar forward: conv on small integers (exact); gamma and the running variance positive.
  struct NamedFused {
    const char* name;
    const char* op;
    Window w;
    bool bias;
    bool bias_cancelled = false;
    double relu_max = 0;
    bool prologue = false;
  };
  const NamedFused blocks[] = {
      {"Cbr", "cbr", {{2, 8, 8, 4}, {8, 3, 3, 4}, {1, 1}, {1, 1}}, false},
      {"CbrBiasStride2", "cbr", {{2, 9, 9, 3}, {6, 3, 3, 3}, {2, 2}, {1, 1}}, true},
      {"Cbar", "cbar", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, false},
      {"CbarBias1x1", "cbar", {{3, 6, 6, 16}, {16, 1, 1, 16}, {1, 1}, {0, 0}}, true},
      // The bias cancelled by the batch mean: conv_out and saved_mean without it, the running
      // mean with it.
      {"CbrCancelledBias", "cbr", {{2, 8, 8, 4}, {8, 3, 3, 4}, {1, 1}, {1, 1}}, true, true},
      {"CbarCancelledBias1x1", "cbar", {{3, 6, 6, 16}, {16, 1, 1, 16}, {1, 1}, {0, 0}}, true, true},
      // Clipped relus (ReLU6's form): at 1 the batch-normalised values clip often, at 6 rarely.
      {"CbrClip1", "cbr", {{2, 8, 8, 4}, {8, 3, 3, 4}, {1, 1}, {1, 1}}, false, false, 1.0},
      {"CbrClip6Bias", "cbr", {{2, 9, 9, 3}, {6, 3, 3, 3}, {2, 2}, {1, 1}}, true, false, 6.0},
      // The cross-layer forms (defer_bn_apply): statistics only, with and without reading the
      // input through the previous layer's affine, and a cbr that reads its input so.
      {"Stats", "conv_bn_stats", {{2, 8, 8, 4}, {8, 3, 3, 4}, {1, 1}, {1, 1}}, false},
      {"StatsPrologueCancelledBias1x1", "conv_bn_stats", {{3, 6, 6, 16}, {16, 1, 1, 16}, {1, 1}, {0, 0}}, true, true,
       0, true},
      {"CbrPrologue", "cbr", {{2, 8, 8, 8}, {8, 3, 3, 8}, {1, 1}, {1, 1}}, false, false, 0, true},
  };
  for (const NamedFused& n : blocks) {
    const Window w = n.w;
    const bool bias = n.bias, cancelled = n.bias_cancelled;
    const double relu_max = n.relu_max;
    const bool prologue = n.prologue;
    const std::string op = n.op;
    auto build = [=](DType d) { return fused(op, w, bias, d, cancelled, relu_max, prologue); };
    OpCase c = exact_case(op + "_" + n.name, build);
    c.prepare = make_positive({"gamma", "running_var"});
    // The prologue is defer_bn_apply's form, which the cpu backend's traits leave out.
    if (prologue) c.backends = {"cuda"};
    cases.push_back(std::move(c));
    // Forward on random reals: conv, batch statistics, running statistics, y.
    OpCase d = decomposition_case(op + "_" + n.name, build);
    if (prologue) d.backends = {"cuda"};
    cases.push_back(std::move(d));
  }
}

}  // namespace trident::test_support::op_family
