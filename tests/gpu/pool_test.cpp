// The cuda backend's pooling family against cpu_ref: max and average pooling (with and
// without padding, count_include_pad on and off, overlapping windows) and global average
// pooling, forward and backward, in f32 and f16, on odd channel counts; max-pool backward ties
// go to the first maximum exactly like the reference; repeated runs give identical bits.
// Global average pooling also over its 16-byte channel vectors and the scalar path beside
// them (C not a multiple of the width, misaligned tensors), in f32, f16 and bf16, with one
// spatial position and with many.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using ir::Attrs;
using test_support::compare_with_cpu_ref;
using test_support::check_against_reference;
using test_support::GraphBuild;
struct WindowCase {
  Shape x;
  std::vector<int64_t> kernel, stride, padding;
  int64_t include_pad;
};

const std::vector<WindowCase> kWindows = {
    {{2, 9, 11, 3}, {3, 3}, {2, 2}, {1, 1}, 1},   // ResNet stem pooling, odd sizes
    {{1, 8, 8, 10}, {2, 2}, {2, 2}, {0, 0}, 1},   // non-overlapping
    {{3, 7, 5, 33}, {3, 2}, {1, 1}, {1, 0}, 0},   // overlapping, padding excluded from the mean
    {{2, 6, 6, 64}, {3, 3}, {1, 2}, {1, 1}, 0},   // C % 8 = 0: the 16-byte vector kernels
    {{2, 8, 10, 16}, {2, 2}, {2, 2}, {0, 0}, 1},  // VGG's pooling, vector kernels
};

Attrs window_attrs(const WindowCase& w) {
  return {{"kernel", w.kernel}, {"stride", w.stride}, {"padding", w.padding}, {"count_include_pad", w.include_pad}};
}

std::string describe(const WindowCase& w, DType t) {
  return shape_str(w.x) + " kernel " + shape_str(w.kernel) + " stride " + shape_str(w.stride) + " padding " +
         shape_str(w.padding) + " " + std::string(dtype_name(t));
}

// Inputs on a coarse grid, so windows hold ties and max-pool backward must pick the first.
void coarse_values(test_support::GraphRunner& r, const ir::Graph& g) {
  for (int v = 0; v < g.num_values(); ++v) {
    if (g.value(v).role == ir::ValueRole::Activation || g.value(v).name != "x") continue;
    TensorView t = r.view(v);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == DType::f32) t.as<float>()[i] = static_cast<float>(i * 7 % 5) - 2.f;
      else t.as<uint16_t>()[i] = float_to_half(static_cast<float>(i * 7 % 5) - 2.f);
    }
  }
}

TEST(CudaPool, MaxPoolForwardAndBackward) {
  TRIDENT_REQUIRE_GPU();
  for (const WindowCase& w : kWindows)
    for (DType t : {DType::f32, DType::f16})
      for (bool ties : {false, true}) {
        SCOPED_TRACE(describe(w, t) + (ties ? " with ties" : ""));
        GraphBuild build = [&](DType d) {
          ir::Graph g;
          const int x = g.add_input("x", w.x, d);
          const int y = g.add_node1("maxpool2d", {x}, window_attrs(w), "y");
          g.add_node1("maxpool2d_backward", {x, g.add_input("dy", g.value(y).shape, d)}, window_attrs(w), "dx");
          return g;
        };
        const ir::Graph gpu = build(t);
        std::function<void(test_support::GraphRunner&)> adjust;
        if (ties) adjust = [&](test_support::GraphRunner& r) { coarse_values(r, gpu); };
        check_against_reference(build, t, {"y", "dx"}, 11, adjust);
      }
}

TEST(CudaPool, AvgPoolForwardAndBackward) {
  TRIDENT_REQUIRE_GPU();
  for (const WindowCase& w : kWindows)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(describe(w, t));
      check_against_reference([&](DType d) {
        ir::Graph g;
        const int y = g.add_node1("avgpool2d", {g.add_input("x", w.x, d)}, window_attrs(w), "y");
        Attrs back = window_attrs(w);
        back.set("input_shape", w.x);
        g.add_node1("avgpool2d_backward", {g.add_input("dy", g.value(y).shape, d)}, back, "dx");
        return g;
      }, t, {"y", "dx"}, 12);
    }
}

TEST(CudaPool, GlobalAvgPoolForwardAndBackward) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 3}, {3, 1, 1, 10}, {1, 56, 57, 5}, {4, 7, 7, 2048}})
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        g.add_node1("global_avgpool", {g.add_input("x", s, d)}, {}, "y");
        g.add_node1("global_avgpool_backward", {g.add_input("dy", {s[0], 1, 1, s[3]}, d)}, {{"input_shape", s}}, "dx");
        return g;
      }, t, {"y", "dx"}, 13);
    }
}

ir::Graph global_avgpool_graph(DType d, const Shape& s) {
  ir::Graph g;
  g.add_node1("global_avgpool", {g.add_input("x", s, d)}, {}, "y");
  g.add_node1("global_avgpool_backward", {g.add_input("dy", {s[0], 1, 1, s[3]}, d)}, {{"input_shape", s}}, "dx");
  return g;
}

// C % 8 = 0 (vector path in every dtype), C = 12 and 20 (f32 vectors, the f16/bf16 scalar
// path), C = 3; HW = 1, small, 3136 (ResNet's first stage) and 12544.
TEST(CudaPool, GlobalAvgPoolVectorAndScalarPaths) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : std::vector<Shape>{{4, 1, 1, 64},
                                           {3, 1, 1, 3},
                                           {5, 3, 3, 12},
                                           {2, 9, 9, 20},
                                           {2, 7, 7, 24},
                                           {8, 56, 56, 64},
                                           {2, 112, 112, 16},
                                           {3, 7, 7, 2048},
                                           {2, 5, 5, 520}})
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) { return global_avgpool_graph(d, s); }, t, {"y", "dx"}, 15);
    }
}

// Tensors one element past 16-byte alignment: the scalar path, even where C splits into vectors.
TEST(CudaPool, GlobalAvgPoolMisalignedTensors) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 64}, {3, 1, 1, 16}, {2, 5, 5, 3}})
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) { return global_avgpool_graph(d, s); }, t, {"y", "dx"}, 16, nullptr, 1);
    }
}

// The backward is one rounding of dy / HW: exactly the reference's result rounded once.
TEST(CudaPool, GlobalAvgPoolBackwardIsExact) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : std::vector<Shape>{{2, 7, 7, 64}, {2, 9, 9, 20}, {4, 1, 1, 3}})
    for (DType t : {DType::f32, DType::f16, DType::bf16})
      for (int64_t misalign : {0, 1}) {
        SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)) + " misaligned by " + std::to_string(misalign));
        test_support::check_rounded_reference(
            [&](DType d) {
              ir::Graph g;
              g.add_node1("global_avgpool_backward", {g.add_input("dy", {s[0], 1, 1, s[3]}, d)},
                          {{"input_shape", s}}, "dx");
              return g;
            },
            t, {"dx"}, 17, misalign);
      }
}

TEST(CudaPool, GlobalAvgPoolRunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const ir::Graph g = global_avgpool_graph(t, {8, 56, 56, 64});
    for (const char* name : {"y", "dx"})
      EXPECT_EQ(test_support::run_once_on_gpu(g, name, 18), test_support::run_once_on_gpu(g, name, 18))
          << name << " " << dtype_name(t);
  }
}

TEST(CudaPool, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const WindowCase& w = kWindows[0];
  ir::Graph g;
  const int x = g.add_input("x", w.x, DType::f16);
  const int y = g.add_node1("maxpool2d", {x}, window_attrs(w), "y");
  g.add_node1("maxpool2d_backward", {x, g.add_input("dy", g.value(y).shape, DType::f16)}, window_attrs(w), "dx");
  g.add_node1("global_avgpool", {x}, {}, "gap");
  for (const char* name : {"y", "dx", "gap"}) EXPECT_EQ(test_support::run_once_on_gpu(g, name, 14), test_support::run_once_on_gpu(g, name, 14)) << name;
}

}  // namespace
}  // namespace trident
