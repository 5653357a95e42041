// Op cases of the mobile families' ops: each activation (ops/activation.cpp: GELU in both forms
// too) and its backward (clip's too) on a 4-D activation and a ragged size, in f32 and f16;
// layernorm over the channels and its backward; squeeze-excitation's mul
// by a per-sample gate [N,1,1,C] and mul_reduce, the gradient of a broadcast operand, per
// channel and per sample; ShuffleNet's channel_shuffle (exact: it only moves values).
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

Attrs fn_attrs(const std::string& fn) {
  Attrs a{{"fn", fn}};
  if (fn == "hardsigmoid") a.set("alpha", 0.2), a.set("beta", 0.5);
  if (fn == "clip") a.set("min", 0.0), a.set("max", 0.5);
  return a;
}

}  // namespace

void add_activation_cases(std::vector<OpCase>& cases) {
  const char* fns[] = {"sigmoid", "silu", "hardsigmoid", "hardswish", "gelu", "gelu_tanh"};
  for (const Shape& s : {Shape{2, 5, 7, 8}, Shape{3, 1001}}) {
    for (const std::string fn : fns)
      cases.push_back(scaled_case(
          "activation_" + fn + "_" + tag(s),
          [=](DType d) {
            ir::Graph g;
            g.add_node1("activation", {g.add_input("x", s, d)}, fn_attrs(fn), "y");
            return g;
          },
          31, kF32F16));
    for (const std::string fn : {"sigmoid", "silu", "hardsigmoid", "hardswish", "clip", "gelu", "gelu_tanh"})
      cases.push_back(scaled_case(
          "activation_backward_" + fn + "_" + tag(s),
          [=](DType d) {
            ir::Graph g;
            g.add_node1("activation_backward", {g.add_input("x", s, d), g.add_input("dy", s, d)}, fn_attrs(fn), "dx");
            return g;
          },
          32, kF32F16));
  }
  // layernorm over the last axis: ConvNeXt's channels (96, NHWC) and a head's features, ragged
  // sizes (C = 5, rows not a multiple of a block's warps); gamma and beta their own values.
  for (const Shape& s : {Shape{2, 5, 7, 96}, Shape{3, 1, 1, 5}, Shape{37, 200}}) {
    const Shape c{s.back()};
    cases.push_back(scaled_case(
        "layernorm_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          g.add_node1("layernorm", {g.add_input("x", s, d), g.add_parameter("gamma", c, {}, d),
                                    g.add_parameter("beta", c, {}, d)},
                      {{"eps", 1e-6}}, "ln");
          return g;
        },
        36, kF32F16));
    cases.push_back(scaled_case(
        "layernorm_backward_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          g.add_node("layernorm_backward",
                     {g.add_input("x", s, d), g.add_input("dy", s, d), g.add_parameter("gamma", c, {}, d)},
                     {{"eps", 1e-6}}, "lnb");
          return g;
        },
        37, kF32F16));
  }
  for (auto [s, groups] : std::vector<std::pair<Shape, int64_t>>{{{2, 3, 5, 12}, 3}, {{3, 1, 1, 8}, 2}, {{2, 4, 4, 6}, 6}}) {
    const Shape shape = s;
    const int64_t g = groups;
    OpCase c = scaled_case(
        "channel_shuffle_" + tag(shape) + "_g" + std::to_string(g),
        [=](DType d) {
          ir::Graph gr;
          gr.add_node1("channel_shuffle", {gr.add_input("x", shape, d)}, {{"groups", g}}, "y");
          return gr;
        },
        35, kAllFloat);
    c.measure = Measure::Rounded;
    cases.push_back(std::move(c));
  }
  for (const Shape& s : {Shape{2, 5, 7, 8}, Shape{3, 4, 4, 3}}) {
    const Shape gate{s[0], 1, 1, s[3]};
    cases.push_back(scaled_case(
        "mul_per_sample_" + tag(s),
        [=](DType d) {
          ir::Graph g;
          g.add_node1("mul", {g.add_input("a", s, d), g.add_input("b", gate, d)}, {}, "y");
          return g;
        },
        33, kF32F16));
    for (const Shape& b : {gate, Shape{s[3]}})
      cases.push_back(scaled_case(
          "mul_reduce_" + tag(s) + "_to_" + tag(b),
          [=](DType d) {
            ir::Graph g;
            g.add_node1("mul_reduce", {g.add_input("a", s, d), g.add_input("dy", s, d), g.add_input("b", b, d)}, {},
                        "db");
            return g;
          },
          34, kF32F16));
  }
}

}  // namespace trident::test_support::op_family
