// The cuda linear family's (cuBLASLt) own promise beyond agreement with cpu_ref (which the op
// case table, support/op_cases/linear_loss_sgd_cases.cpp, checks on every backend): forward and
// both backward passes give identical bits when run twice.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

using test_support::run_once_on_gpu;

TEST(CudaLinear, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = test_support::op_case("linear_fwd_bwd_N256_I2048_O1000_bias").build(DType::f32);
  for (const char* name : {"y", "dx", "wgrad.dw", "wgrad.db"})
    EXPECT_EQ(run_once_on_gpu(g, name, 52), run_once_on_gpu(g, name, 52)) << name;
}

}  // namespace
}  // namespace trident
