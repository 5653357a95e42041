// The cuda element-wise kernels' own promises beyond agreement with cpu_ref (which the op case
// table, support/op_cases/elementwise_cases.cpp, checks on every backend): fill writes its value
// in every dtype, over whole vectors, tails and misaligned memory; the same node run twice gives
// the same bits, on the vector paths too; f64 is refused with a reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

using test_support::op_case;
using test_support::produced_names;
using test_support::run_once_on_gpu;

TEST(CudaElementwise, FillWritesF16AndBf16) {
  TRIDENT_REQUIRE_GPU();
  for (const char* dtype : {"f16", "bf16"}) {
    ir::Graph g;
    g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{257}}, {"value", 0.75}, {"dtype", std::string(dtype)}},
                "y");
    for (double v : run_once_on_gpu(g, "y", 6)) ASSERT_EQ(v, 0.75) << dtype;
  }
}

TEST(CudaElementwise, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = op_case("elementwise_program_scaled_3x17x19x33").build(DType::f16);
  for (const std::string& name : produced_names(g))
    EXPECT_EQ(run_once_on_gpu(g, name, 10), run_once_on_gpu(g, name, 10)) << name;
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
    const ir::Graph g = op_case("exact_elementwise_program_8x56x56x64").build(t);
    for (const std::string& name : produced_names(g))
      EXPECT_EQ(run_once_on_gpu(g, name, 24), run_once_on_gpu(g, name, 24)) << name;
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
