// The cuda batchnorm family's own promise beyond agreement with cpu_ref (which the op case table,
// support/op_cases/batchnorm_cases.cpp, checks on every backend): statistics and gradients are
// bitwise identical when run twice, for a training forward over many row chunks and the fused
// relu backward with its residual gradient.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

using test_support::run_once_on_gpu;

TEST(CudaBatchNorm, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  ir::Graph fwd;
  const Shape c{10};
  fwd.add_node(
      "batchnorm2d",
      {fwd.add_input("x", {32, 28, 28, 10}), fwd.add_parameter("gamma", c, {}), fwd.add_parameter("beta", c, {}),
       fwd.add_state("running_mean", c, {}), fwd.add_state("running_var", c, {})},
      {{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{1}}}, "bn");
  for (const char* name : {"bn.y", "bn.saved_mean", "bn.saved_invstd", "running_var"})
    EXPECT_EQ(run_once_on_gpu(fwd, name, 26), run_once_on_gpu(fwd, name, 26)) << name;
  const ir::Graph bwd = test_support::op_case("batchnorm_relu_backward_8x14x14x64_residual").build(DType::f16);
  for (const char* name : {"brb.dconv", "brb.dgamma", "brb.dbeta", "brb.dresidual"})
    EXPECT_EQ(run_once_on_gpu(bwd, name, 27), run_once_on_gpu(bwd, name, 27)) << name;
}

}  // namespace
}  // namespace trident
