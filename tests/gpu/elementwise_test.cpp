// The cuda backend's element-wise family against cpu_ref: relu, relu_backward, add, mul, clip,
// fill, the views, concat and the fused `elementwise` op, in f32 and (for activations) f16,
// on odd sizes; and bitwise-identical results when the same node runs twice. The 16-byte
// vector paths, their tails (element counts that are no multiple of the vector width) and
// the scalar paths (misaligned tensors, per-channel mul with C not a multiple of the width)
// must give exactly the reference's result rounded once to f32, f16 or bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using ir::Attrs;
using test_support::compare_with_cpu_ref;

using test_support::check_against_reference;
using test_support::GraphBuild;
const std::vector<Shape> kShapes = {{2, 5, 7, 3}, {1, 1, 1, 10}, {3, 17, 19, 33}, {1, 1, 1, 300007}};

TEST(CudaElementwise, ReluMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        g.add_node1("relu", {g.add_input("x", s, d)}, {}, "y");
        return g;
      }, t, {"y"}, 1);
    }
}

TEST(CudaElementwise, ReluBackwardMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        g.add_node1("relu_backward", {g.add_input("y", s, d), g.add_input("dy", s, d)}, {}, "dx");
        return g;
      }, t, {"dx"}, 2);
    }
}

TEST(CudaElementwise, AddMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        g.add_node1("add", {g.add_input("a", s, d), g.add_input("b", s, d)}, {}, "y");
        return g;
      }, t, {"y"}, 3);
    }
}

TEST(CudaElementwise, MulSameShapeAndPerChannel) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (bool per_channel : {false, true}) {
      SCOPED_TRACE(shape_str(s) + (per_channel ? " per channel" : " same shape"));
      check_against_reference([&](DType d) {
        ir::Graph g;
        const Shape b = per_channel ? Shape{s.back()} : s;
        g.add_node1("mul", {g.add_input("a", s, d), g.add_input("b", b, d)}, {}, "y");
        return g;
      }, DType::f32, {"y"}, 4);
    }
}

TEST(CudaElementwise, ClipWithBothAndOneBound) {
  TRIDENT_REQUIRE_GPU();
  for (const Attrs& bounds : {Attrs{{"min", 0.0}, {"max", 0.5}}, Attrs{{"min", -0.25}}, Attrs{{"max", 0.3}}})
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(bounds.to_string() + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        g.add_node1("clip", {g.add_input("x", {3, 7, 5, 10}, d)}, bounds, "y");
        return g;
      }, t, {"y"}, 5);
    }
}

TEST(CudaElementwise, FillEveryDtype) {
  TRIDENT_REQUIRE_GPU();
  for (const char* dtype : {"f32", "i32"}) {
    SCOPED_TRACE(dtype);
    check_against_reference([&](DType) {
      ir::Graph g;
      g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{3, 1001}}, {"value", 2.0}, {"dtype", std::string(dtype)}},
                  "y");
      return g;
    }, DType::f32, {"y"}, 6);
  }
  for (const char* dtype : {"f16", "bf16"}) {
    ir::Graph g;
    g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{257}}, {"value", 0.75}, {"dtype", std::string(dtype)}}, "y");
    for (double v : test_support::run_once_on_gpu(g, "y", 6)) ASSERT_EQ(v, 0.75) << dtype;
  }
}

TEST(CudaElementwise, FlattenAndReshapeKeepTheValues) {
  TRIDENT_REQUIRE_GPU();
  check_against_reference([&](DType d) {
    ir::Graph g;
    const int x = g.add_input("x", {4, 3, 5, 7}, d);
    const int f = g.add_node1("flatten", {x}, {}, "flat");
    g.add_node1("reshape", {f}, {{"shape", std::vector<int64_t>{4, 35, 3}}}, "y");
    return g;
  }, DType::f32, {"flat", "y"}, 7);
}

TEST(CudaElementwise, ConcatAlongChannels) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16})
    check_against_reference([&](DType d) {
      ir::Graph g;
      const int a = g.add_input("a", {2, 9, 11, 3}, d), b = g.add_input("b", {2, 9, 11, 10}, d),
                c = g.add_input("c", {2, 9, 11, 1}, d);
      g.add_node1("concat", {a, b, c}, {}, "y");
      return g;
    }, t, {"y"}, 8);
}

// Names of every value the nodes of `g` produce.
std::vector<std::string> produced_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (int v = 0; v < g.num_values(); ++v)
    if (g.value(v).role == ir::ValueRole::Activation) names.push_back(g.value(v).name);
  return names;
}

// Two outputs sharing x0: relu(x0 + x1) + x2 and relu(x0).
ir::Graph program_graph(DType d, const Shape& s) {
  ir::Graph g;
  const int x0 = g.add_input("x0", s, d), x1 = g.add_input("x1", s, d), x2 = g.add_input("x2", s, d);
  g.add_node("elementwise", {x0, x1, x2}, {{"programs", std::string("add:1,relu,add:2;relu")}}, "ew");
  return g;
}

TEST(CudaElementwise, FusedProgramMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) { return program_graph(d, s); }, t, produced_names(program_graph(t, s)), 9);
    }
}

TEST(CudaElementwise, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = program_graph(DType::f16, {3, 17, 19, 33});
  for (const std::string& name : produced_names(g)) EXPECT_EQ(test_support::run_once_on_gpu(g, name, 10), test_support::run_once_on_gpu(g, name, 10)) << name;
}

// Element counts for the vector paths: fewer than one vector (a tail only), 210 (a tail of
// two), odd, whole vectors of a real activation, a large odd count.
const std::vector<Shape> kVectorShapes = {
    {1, 1, 1, 7}, {2, 5, 7, 3}, {3, 17, 19, 33}, {8, 56, 56, 64}, {1, 1, 1, 300007}};
const DType kAllDtypes[] = {DType::f32, DType::f16, DType::bf16};

// One graph per element-wise op (the fused program has two outputs), for the exact comparisons
// below.
struct OpCase {
  const char* name;
  std::function<ir::Graph(DType, const Shape&)> build;
  std::vector<std::string> outputs;  // empty: every value the graph produces
};

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = {
      {"relu",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("relu", {g.add_input("x", s, d)}, {}, "y");
         return g;
       },
       {"y"}},
      {"relu_backward",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("relu_backward", {g.add_input("y", s, d), g.add_input("dy", s, d)}, {}, "dx");
         return g;
       },
       {"dx"}},
      {"add",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("add", {g.add_input("a", s, d), g.add_input("b", s, d)}, {}, "y");
         return g;
       },
       {"y"}},
      {"mul",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("mul", {g.add_input("a", s, d), g.add_input("b", s, d)}, {}, "y");
         return g;
       },
       {"y"}},
      {"mul per channel",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("mul", {g.add_input("a", s, d), g.add_input("b", {s.back()}, d)}, {}, "y");
         return g;
       },
       {"y"}},
      {"clip",
       [](DType d, const Shape& s) {
         ir::Graph g;
         g.add_node1("clip", {g.add_input("x", s, d)}, {{"min", -0.25}, {"max", 0.5}}, "y");
         return g;
       },
       {"y"}},
      {"elementwise program", [](DType d, const Shape& s) { return program_graph(d, s); }, {}},
  };
  return cases;
}

// `op` on `s` in `t` against the f32 reference, exactly (check_rounded_reference).
void check_exact(const OpCase& op, const Shape& s, DType t, uint64_t seed, int64_t misalign = 0) {
  const std::vector<std::string> outputs = op.outputs.empty() ? produced_names(op.build(t, s)) : op.outputs;
  test_support::check_rounded_reference([&](DType d) { return op.build(d, s); }, t, outputs, seed, misalign);
}

std::string describe(const OpCase& op, const Shape& s, DType t, int64_t misalign) {
  return std::string(op.name) + " " + shape_str(s) + " " + std::string(dtype_name(t)) +
         (misalign ? " misaligned by " + std::to_string(misalign) : "");
}

TEST(CudaElementwise, VectorPathsAndTailsAreExact) {
  TRIDENT_REQUIRE_GPU();
  for (const OpCase& op : op_cases())
    for (const Shape& s : kVectorShapes)
      for (DType t : kAllDtypes) {
        SCOPED_TRACE(describe(op, s, t, 0));
        check_exact(op, s, t, 21);
      }
}

// Tensors one element past 16-byte alignment: every kernel falls back to its scalar path.
TEST(CudaElementwise, MisalignedTensorsTakeTheScalarPathExactly) {
  TRIDENT_REQUIRE_GPU();
  for (const OpCase& op : op_cases())
    for (const Shape& s : std::vector<Shape>{{2, 5, 7, 3}, {2, 4, 4, 64}})
      for (DType t : kAllDtypes)
        for (int64_t misalign : {1, 3}) {
          SCOPED_TRACE(describe(op, s, t, misalign));
          check_exact(op, s, t, 22, misalign);
        }
}

// Per-channel mul: C a multiple of the vector width (vector path) or not (C = 3, 12, 20: the
// scalar path in f16/bf16; 12 and 20 are whole f32 vectors), many rows or a single row.
TEST(CudaElementwise, MulPerChannelVectorAndScalarPaths) {
  TRIDENT_REQUIRE_GPU();
  const OpCase& op = *std::find_if(op_cases().begin(), op_cases().end(),
                                   [](const OpCase& c) { return std::string(c.name) == "mul per channel"; });
  for (const Shape& s : std::vector<Shape>{
           {2, 5, 7, 3}, {4, 6, 6, 12}, {2, 9, 9, 20}, {8, 56, 56, 64}, {3, 1, 1, 2048}, {1, 1, 1, 300008}})
    for (DType t : kAllDtypes) {
      SCOPED_TRACE(describe(op, s, t, 0));
      check_exact(op, s, t, 23);
    }
}

// Fill over whole vectors, a tail, fewer elements than one vector, and misaligned memory.
TEST(CudaElementwise, FillVectorPathTailAndMisaligned) {
  TRIDENT_REQUIRE_GPU();
  for (const char* dtype : {"f32", "f16", "bf16", "i32"})
    for (int64_t n : {int64_t{3}, int64_t{257}, int64_t{8 * 56 * 56 * 64 + 5}})
      for (int64_t misalign : {0, 1}) {
        SCOPED_TRACE(std::string(dtype) + " n " + std::to_string(n) + " misaligned by " + std::to_string(misalign));
        ir::Graph g;
        // 3: exact in every dtype, and not the zeros of fresh device memory (i32 outputs are
        // not poisoned by the runner).
        g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{n}}, {"value", 3.0}, {"dtype", std::string(dtype)}},
                    "y");
        test_support::GraphRunner r(g, "cuda", misalign);
        r.run();
        const std::vector<double> got = r.values(g.find_value("y"));
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 3.0) << "element " << i;
      }
}

TEST(CudaElementwise, VectorPathRunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f16, DType::bf16}) {
    const ir::Graph g = program_graph(t, {8, 56, 56, 64});
    for (const std::string& name : produced_names(g))
      EXPECT_EQ(test_support::run_once_on_gpu(g, name, 24), test_support::run_once_on_gpu(g, name, 24)) << name;
  }
}

TEST(CudaElementwise, RejectsF64WithAReason) {
  TRIDENT_REQUIRE_GPU();
  ir::Graph g;
  g.add_node1("relu", {g.add_input("x", {2, 3}, DType::f64)}, {}, "y");
  try {
    test_support::GraphRunner r(g, "cuda");
    r.run();
    FAIL() << "f64 relu ran on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident
