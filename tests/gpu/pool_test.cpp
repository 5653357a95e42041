// The cuda pooling kernels' own promise beyond agreement with cpu_ref (which the op case table,
// support/op_cases/pool_cases.cpp, checks on every backend): repeated runs give identical bits,
// for max pooling with its backward and global average pooling, in f16 and on the vector paths.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

using test_support::run_once_on_gpu;

TEST(CudaPool, GlobalAvgPoolRunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const ir::Graph g = test_support::op_case("global_avgpool_paths_8x56x56x64").build(t);
    for (const char* name : {"y", "dx"})
      EXPECT_EQ(run_once_on_gpu(g, name, 18), run_once_on_gpu(g, name, 18)) << name << " " << dtype_name(t);
  }
}

TEST(CudaPool, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  // The ResNet stem's pooling on odd sizes.
  const ir::Attrs window{{"kernel", std::vector<int64_t>{3, 3}},
                         {"stride", std::vector<int64_t>{2, 2}},
                         {"padding", std::vector<int64_t>{1, 1}},
                         {"count_include_pad", int64_t{1}}};
  ir::Graph g;
  const int x = g.add_input("x", {2, 9, 11, 3}, DType::f16);
  const int y = g.add_node1("maxpool2d", {x}, window, "y");
  g.add_node1("maxpool2d_backward", {x, g.add_input("dy", g.value(y).shape, DType::f16)}, window, "dx");
  g.add_node1("global_avgpool", {x}, {}, "gap");
  for (const char* name : {"y", "dx", "gap"})
    EXPECT_EQ(run_once_on_gpu(g, name, 14), run_once_on_gpu(g, name, 14)) << name;
}

}  // namespace
}  // namespace trident
