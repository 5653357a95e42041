// The cuda backend's linear family (cuBLASLt) against cpu_ref: forward with and without bias,
// backward data and backward weight (with and without the bias gradient), in f32 (on TF32
// tensor cores, hence compared on the f16 row) and f16, over square, skinny and odd shapes;
// and identical bits when run twice.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using test_support::compare_with_cpu_ref;

struct Dims {
  int64_t N, I, O;
};
const std::vector<Dims> kDims = {{8, 16, 8}, {32, 512, 10}, {256, 2048, 1000}, {5, 24, 40}};

// Tolerance row: TF32 keeps 10 mantissa bits, so f32 products compare like f16 ones.
DType row_for(DType t) { return t == DType::f32 ? DType::f16 : t; }

std::string describe(const Dims& d, DType t) {
  return "N " + std::to_string(d.N) + " I " + std::to_string(d.I) + " O " + std::to_string(d.O) + " " +
         std::string(dtype_name(t));
}

ir::Graph linear_graph(DType t, const Dims& d, bool bias) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", {d.N, d.I}, t), g.add_parameter("w", {d.O, d.I}, {}, t)};
  if (bias) in.push_back(g.add_parameter("b", {d.O}, {}, t));
  g.add_node1("linear", in, {}, "y");
  const int dy = g.add_input("dy", {d.N, d.O}, t);
  g.add_node1("linear_backward_data", {dy, in[1]}, {}, "dx");
  g.add_node("linear_backward_weight", {in[0], dy}, {{"has_bias", int64_t{bias}}}, "wgrad");
  return g;
}

TEST(CudaLinear, ForwardAndBothBackwardPasses) {
  TRIDENT_REQUIRE_GPU();
  for (const Dims& d : kDims)
    for (bool bias : {false, true})
      for (DType t : {DType::f32, DType::f16}) {
        SCOPED_TRACE(describe(d, t) + (bias ? " with bias" : ""));
        std::vector<std::string> outs{"y", "dx", bias ? "wgrad.dw" : "wgrad"};
        if (bias) outs.push_back("wgrad.db");
        compare_with_cpu_ref(linear_graph(t, d, bias), linear_graph(DType::f32, d, bias), outs, row_for(t), 51);
      }
}

TEST(CudaLinear, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = linear_graph(DType::f32, kDims[2], true);
  auto run = [&](const char* name) {
    test_support::GraphRunner r(g, "cuda");
    r.randomize(52);
    r.run();
    return r.values(g.find_value(name));
  };
  for (const char* name : {"y", "dx", "wgrad.dw", "wgrad.db"}) EXPECT_EQ(run(name), run(name)) << name;
}

}  // namespace
}  // namespace trident
