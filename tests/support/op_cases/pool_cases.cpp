// Op cases of the pooling family: max and average pooling (padding, count_include_pad on and off,
// overlapping and mixed windows) and global average pooling, forward and backward. Max pooling runs
// on values with many ties (small integers or a coarse grid): the first maximum must win on every
// backend; so must the window index a training max pooling keeps for its backward. Global
// average pooling also over 16-byte channel vectors, the scalar path beside them
// and misaligned tensors; its backward is exactly one rounding.
#include "core/half.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

// Inputs named "x" on a coarse grid, so windows hold ties and max-pool backward must pick the
// first.
void coarse_values(GraphRunner& r, const ir::Graph& g) {
  const int v = g.find_value("x");
  TensorView t = r.view(v);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = static_cast<float>(i * 7 % 5) - 2.f;
    if (t.dtype == DType::f32) t.as<float>()[i] = x;
    else if (t.dtype == DType::f16) t.as<uint16_t>()[i] = float_to_half(x);
    else t.as<uint16_t>()[i] = float_to_bf16(x);
  }
}

ir::Graph global_avgpool_graph(DType d, const Shape& s) {
  ir::Graph g;
  g.add_node1("global_avgpool", {g.add_input("x", s, d)}, {}, "y");
  g.add_node1("global_avgpool_backward", {g.add_input("dy", {s[0], 1, 1, s[3]}, d)}, {{"input_shape", s}}, "dx");
  return g;
}

ir::Graph global_avgpool_backward_graph(DType d, const Shape& s) {
  ir::Graph g;
  g.add_node1("global_avgpool_backward", {g.add_input("dy", {s[0], 1, 1, s[3]}, d)}, {{"input_shape", s}}, "dx");
  return g;
}

// A training max pooling with its window index (core/window_index.h), and the backward that
// reads the index instead of x: y, the index's words and dx against cpu_ref's.
OpCase window_index_case(const std::string& name, const Shape& xs, const Attrs& geom) {
  const Shape ys = inferred_shape("maxpool2d", {xs}, geom);
  Attrs forward = geom, backward = geom;
  forward.set("window_index", int64_t{1});
  backward.set("input_shape", xs);
  return per_element_case("maxpool2d_window_index_" + name, [=](DType d) {
    ir::Graph g;
    const std::vector<int> f = g.add_node("maxpool2d", {g.add_input("x", xs, d)}, forward, "maxpool");
    g.add_node1("maxpool2d_index_backward", {f[1], g.add_input("dy", ys, d)}, backward, "maxpool.backward");
    return g;
  }, Fill::SmallInts);
}

// The same pair reading a raw convolution output through the previous layer's affine
// (defer_bn_apply's prologue): y, the index and dx against cpu_ref's bn_apply + maxpool2d.
OpCase prologue_case(const std::string& name, const Shape& xs, const Attrs& geom) {
  const Shape ys = inferred_shape("maxpool2d", {xs}, geom);
  Attrs forward = geom, backward = geom;
  forward.set("window_index", int64_t{1});
  forward.set("prologue", int64_t{1});
  backward.set("input_shape", xs);
  return per_element_case("maxpool2d_prologue_" + name, [=](DType d) {
    ir::Graph g;
    const std::vector<int> f =
        g.add_node("maxpool2d", {g.add_input("x", xs, d), g.add_input("x_affine", {2, xs[3]})}, forward, "maxpool");
    g.add_node1("maxpool2d_index_backward", {f[1], g.add_input("dy", ys, d)}, backward, "maxpool.backward");
    return g;
  }, Fill::SmallInts);
}

}  // namespace

void add_pool_cases(std::vector<OpCase>& cases) {
  // One node a case, per element, two draws: max pooling on small integers, average pooling in both
  // padding modes on reals.
  struct Named {
    const char* name;
    Shape x;
    std::vector<int64_t> kernel, stride, pad;
  };
  const Named odd[] = {
      {"K3S2P1", {2, 9, 9, 5}, {3, 3}, {2, 2}, {1, 1}},       {"K2S2", {2, 8, 8, 3}, {2, 2}, {2, 2}, {0, 0}},
      {"K3S1P1", {1, 7, 6, 4}, {3, 3}, {1, 1}, {1, 1}},       {"K2S2OddFloor", {2, 7, 7, 4}, {2, 2}, {2, 2}, {0, 0}},
      {"K3S2P1Even", {3, 8, 10, 16}, {3, 3}, {2, 2}, {1, 1}}, {"K2x3Mixed", {2, 9, 8, 6}, {2, 3}, {1, 2}, {1, 1}},
      // 16-byte channel vectors in f16 and odd sizes: the GPU's blocked stride-2 gather, whose
      // last row and column of 2×2 blocks hold one cell
      {"K3S2P1OddC8", {2, 9, 11, 8}, {3, 3}, {2, 2}, {1, 1}}, {"K2S2P1OddC8", {1, 7, 9, 8}, {2, 2}, {2, 2}, {1, 1}}};
  // ceil_mode: windows that overhang the bottom and right edges, and one (K2S2P1) whose last
  // window would start in the right padding and so does not count.
  const Named ceil[] = {{"K3S2Ceil", {2, 8, 8, 4}, {3, 3}, {2, 2}, {0, 0}},
                        {"K3S2P1Ceil", {2, 10, 10, 4}, {3, 3}, {2, 2}, {1, 1}},
                        {"K2S2P1Ceil", {1, 5, 5, 3}, {2, 2}, {2, 2}, {1, 1}},
                        {"K3S2CeilC8", {1, 9, 7, 8}, {3, 3}, {2, 2}, {0, 0}}};
  for (const Named& n : ceil) {
    const Shape xs = n.x;
    const Attrs geom{{"kernel", n.kernel}, {"stride", n.stride}, {"padding", n.pad}, {"ceil_mode", int64_t{1}}};
    const Shape ys = inferred_shape("maxpool2d", {xs}, geom);
    cases.push_back(per_element_case(std::string("maxpool2d_") + n.name, [=](DType d) {
      ir::Graph g;
      g.add_node1("maxpool2d", {g.add_input("x", xs, d)}, geom, "maxpool");
      return g;
    }, Fill::SmallInts));
    cases.push_back(per_element_case(std::string("maxpool2d_backward_") + n.name, [=](DType d) {
      ir::Graph g;
      g.add_node1("maxpool2d_backward", {g.add_input("x", xs, d), g.add_input("dy", ys, d)}, geom, "maxpool.backward");
      return g;
    }, Fill::SmallInts));
    cases.push_back(window_index_case(n.name, xs, geom));
  }
  for (const Named& n : odd) {
    const Shape xs = n.x;
    const Attrs geom{{"kernel", n.kernel}, {"stride", n.stride}, {"padding", n.pad}};
    const Shape ys = inferred_shape("maxpool2d", {xs}, geom);
    auto one = [&](std::string name, Fill fill, std::function<ir::Graph(DType)> build) {
      cases.push_back(per_element_case(std::move(name), std::move(build), fill));
    };
    one(std::string("maxpool2d_") + n.name, Fill::SmallInts, [=](DType d) {
      ir::Graph g;
      g.add_node1("maxpool2d", {g.add_input("x", xs, d)}, geom, "maxpool");
      return g;
    });
    one(std::string("maxpool2d_backward_") + n.name, Fill::SmallInts, [=](DType d) {
      ir::Graph g;
      g.add_node1("maxpool2d_backward", {g.add_input("x", xs, d), g.add_input("dy", ys, d)}, geom, "maxpool.backward");
      return g;
    });
    cases.push_back(window_index_case(n.name, xs, geom));
    cases.push_back(prologue_case(n.name, xs, geom));
    for (int64_t include : {1, 0}) {
      Attrs a = geom;
      a.set("count_include_pad", include);
      const std::string mode = include ? "include_pad_" : "exclude_pad_";
      one("avgpool2d_" + mode + n.name, Fill::Uniform, [=](DType d) {
        ir::Graph g;
        g.add_node1("avgpool2d", {g.add_input("x", xs, d)}, a, "avgpool");
        return g;
      });
      Attrs back = a;
      back.set("input_shape", xs);
      one("avgpool2d_backward_" + mode + n.name, Fill::Uniform, [=](DType d) {
        ir::Graph g;
        g.add_node1("avgpool2d_backward", {g.add_input("dy", ys, d)}, back, "avgpool.backward");
        return g;
      });
    }
  }
  for (const Shape& xs : {Shape{2, 7, 7, 8}, Shape{3, 1, 1, 5}, Shape{1, 4, 6, 33}}) {
    for (bool backward : {false, true}) {
      cases.push_back(per_element_case(
          std::string(backward ? "global_avgpool_backward_" : "global_avgpool_") + tag(xs), [=](DType d) {
            ir::Graph g;
            if (backward)
              g.add_node1("global_avgpool_backward", {g.add_input("dy", {xs[0], 1, 1, xs[3]}, d)},
                          {{"input_shape", xs}}, "gap.backward");
            else g.add_node1("global_avgpool", {g.add_input("x", xs, d)}, {}, "gap");
            return g;
          }));
    }
  }

  // Forward and backward in one graph, f32 and f16, relative to the tensor's scale.
  struct Window {
    Shape x;
    std::vector<int64_t> kernel, stride, padding;
    int64_t include_pad;
  };
  const Window windows[] = {
      {{2, 9, 11, 3}, {3, 3}, {2, 2}, {1, 1}, 1},   // ResNet stem pooling, odd sizes
      {{1, 8, 8, 10}, {2, 2}, {2, 2}, {0, 0}, 1},   // non-overlapping
      {{3, 7, 5, 33}, {3, 2}, {1, 1}, {1, 0}, 0},   // overlapping, padding excluded from the mean
      {{2, 6, 6, 64}, {3, 3}, {1, 2}, {1, 1}, 0},   // C % 8 = 0: the 16-byte vector kernels
      {{2, 8, 10, 16}, {2, 2}, {2, 2}, {0, 0}, 1},  // VGG's pooling, vector kernels
  };
  for (const Window& w : windows) {
    const Attrs a{
        {"kernel", w.kernel}, {"stride", w.stride}, {"padding", w.padding}, {"count_include_pad", w.include_pad}};
    const Shape xs = w.x;
    const std::string t = tag(w.x) + "_k" + tag(w.kernel) + "_s" + tag(w.stride) + "_p" + tag(w.padding);
    for (bool ties : {false, true}) {
      OpCase c = scaled_case("maxpool2d_fwd_bwd_" + t + (ties ? "_ties" : ""),
                             [=](DType d) {
                               ir::Graph g;
                               const int x = g.add_input("x", xs, d);
                               const int y = g.add_node1("maxpool2d", {x}, a, "y");
                               g.add_node1("maxpool2d_backward", {x, g.add_input("dy", g.value(y).shape, d)}, a, "dx");
                               return g;
                             },
                             11, kF32F16, {"y", "dx"});
      if (ties) c.prepare = coarse_values;
      cases.push_back(std::move(c));
    }
    Attrs back = a;
    back.set("input_shape", xs);
    cases.push_back(scaled_case("avgpool2d_fwd_bwd_" + t,
                                [=](DType d) {
                                  ir::Graph g;
                                  const int y = g.add_node1("avgpool2d", {g.add_input("x", xs, d)}, a, "y");
                                  g.add_node1("avgpool2d_backward", {g.add_input("dy", g.value(y).shape, d)}, back,
                                              "dx");
                                  return g;
                                },
                                12, kF32F16, {"y", "dx"}));
  }

  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 3}, {3, 1, 1, 10}, {1, 56, 57, 5}, {4, 7, 7, 2048}})
    cases.push_back(scaled_case("global_avgpool_fwd_bwd_" + tag(s), [=](DType d) { return global_avgpool_graph(d, s); },
                                13, kF32F16, {"y", "dx"}));
  // C % 8 = 0 (vector path in every dtype), C = 12 and 20 (f32 vectors, the f16/bf16 scalar path),
  // C = 3; HW = 1, small, 3136 (ResNet's first stage) and 12544.
  for (const Shape& s : std::vector<Shape>{{4, 1, 1, 64},
                                           {3, 1, 1, 3},
                                           {5, 3, 3, 12},
                                           {2, 9, 9, 20},
                                           {2, 7, 7, 24},
                                           {8, 56, 56, 64},
                                           {2, 112, 112, 16},
                                           {3, 7, 7, 2048},
                                           {2, 5, 5, 520}})
    cases.push_back(scaled_case("global_avgpool_paths_" + tag(s), [=](DType d) { return global_avgpool_graph(d, s); },
                                15, kAllFloat, {"y", "dx"}));
  // Device tensors one element past 16-byte alignment: the scalar path, even where C splits into
  // vectors (alignment is a property of device memory: cuda only).
  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 64}, {3, 1, 1, 16}, {2, 5, 5, 3}}) {
    OpCase c = scaled_case("global_avgpool_misaligned_" + tag(s), [=](DType d) { return global_avgpool_graph(d, s); },
                           16, kAllFloat, {"y", "dx"});
    c.misalign = 1;
    c.backends = {"cuda"};
    cases.push_back(std::move(c));
  }
  // The backward is one rounding of dy / HW: exactly the reference's result rounded once. That is
  // the cuda kernel's promise; oneDNN's backward scales by 1 / HW, within the table above.
  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 64}, {2, 9, 9, 20}, {4, 1, 1, 3}})
    for (int64_t misalign : {0, 1}) {
      OpCase c = scaled_case("global_avgpool_backward_exact_" + tag(s) + (misalign ? "_misaligned" : ""),
                             [=](DType d) { return global_avgpool_backward_graph(d, s); }, 17, kAllFloat, {"dx"});
      c.measure = Measure::Rounded;
      c.misalign = misalign;
      c.backends = {"cuda"};
      cases.push_back(std::move(c));
    }
}

}  // namespace trident::test_support::op_family
