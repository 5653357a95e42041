// The cuda backend's batchnorm family against cpu_ref: training forward (y, saved statistics,
// running statistics updated in place), inference forward, batchnorm2d_backward, the fused
// batchnorm_relu_backward with and without the residual gradient, and fold_batchnorm; in f32
// and f16 activations, for channel counts that do not fill a tile (3, 10) and row counts that
// do not fill a block; and bitwise-identical statistics and gradients when run twice.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/relu_mask.h"
#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using ir::Attrs;
using test_support::compare_with_cpu_ref;
using test_support::check_against_reference;
using test_support::GraphBuild;
// N·H·W from 6 (smaller than a block of rows) to 25 088 (many row chunks), C from 3 to 130,
// and resnet_cifar's stage shapes at batch 8.
const std::vector<Shape> kShapes = {{2, 1, 3, 3},     {3, 5, 7, 10},    {8, 14, 14, 64}, {32, 28, 28, 3},
                                    {2, 9, 9, 130},   {8, 32, 32, 16},  {8, 16, 16, 32}, {8, 8, 8, 64}};

// Per-channel tensors share the activation dtype, as the IR's shape inference gives them.
ir::Graph bn_forward(DType d, const Shape& s, bool training) {
  ir::Graph g;
  const Shape c{s[3]};
  const int x = g.add_input("x", s, d);
  const int gamma = g.add_parameter("gamma", c, {}, d), beta = g.add_parameter("beta", c, {}, d);
  const int mean = g.add_state("running_mean", c, {}, d), var = g.add_state("running_var", c, {}, d);
  g.add_node("batchnorm2d", {x, gamma, beta, mean, var},
             {{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{training}}}, "bn");
  return g;
}

TEST(CudaBatchNorm, TrainingForwardUpdatesStatistics) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) { return bn_forward(d, s, true); }, t,
                              {"bn.y", "bn.saved_mean", "bn.saved_invstd", "running_mean", "running_var"}, 21);
    }
}

TEST(CudaBatchNorm, InferenceForwardUsesRunningStatistics) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) { return bn_forward(d, s, false); }, t, {"bn"}, 22);
    }
}

TEST(CudaBatchNorm, BackwardMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE(shape_str(s) + " " + std::string(dtype_name(t)));
      check_against_reference([&](DType d) {
        ir::Graph g;
        const Shape c{s[3]};
        g.add_node("batchnorm2d_backward",
                   {g.add_input("x", s, d), g.add_input("dy", s, d), g.add_input("gamma", c, d),
                    g.add_input("saved_mean", c, d), g.add_input("saved_invstd", c, d)},
                   {{"eps", 1e-5}}, "bwd");
        return g;
      }, t, {"bwd.dx", "bwd.dgamma", "bwd.dbeta"}, 23);
    }
}

// two_gradients: the incoming gradient arrives as dy + dy_other (fold_gradient_sum's form);
// packed: the mask is the 1-bit relu mask (random bits) instead of y.
// affine: the mask is recomputed from conv_out through the layer's affine (defer_bn_apply).
ir::Graph bn_relu_backward(DType d, const Shape& s, bool residual, bool two_gradients = false, bool packed = false,
                           bool affine = false) {
  ir::Graph g;
  const Shape c{s[3]};
  const int mask = affine   ? g.add_input("affine", {2, s[3]})
                   : packed ? g.add_input("relu_mask", relu_mask_shape(s), DType::i32)
                            : g.add_input("y", s, d);
  std::vector<int> in{mask,                       g.add_input("dy", s, d),         g.add_input("conv_out", s, d),
                      g.add_input("gamma", c, d), g.add_input("saved_mean", c, d), g.add_input("saved_invstd", c, d)};
  if (two_gradients) in.push_back(g.add_input("dy_other", s, d));
  g.add_node("batchnorm_relu_backward", in, {{"eps", 1e-5}, {"residual", int64_t{residual}}}, "brb");
  return g;
}

TEST(CudaBatchNorm, FusedReluBackwardWithAndWithoutResidual) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (bool residual : {false, true})
      for (bool two_gradients : {false, true})
        for (DType t : {DType::f32, DType::f16}) {
          SCOPED_TRACE(shape_str(s) + (residual ? " residual " : " ") + (two_gradients ? "dy+dy_other " : "") +
                       std::string(dtype_name(t)));
          std::vector<std::string> outs{"brb.dconv", "brb.dgamma", "brb.dbeta"};
          if (residual) outs.push_back("brb.dresidual");
          check_against_reference([&](DType d) { return bn_relu_backward(d, s, residual, two_gradients); }, t, outs,
                                  24);
        }
}

// The backward reading the packed relu mask, through the vector path (C a multiple of 8) and
// the scalar path (C = 3 and 10 take it), with one and two incoming gradients.
TEST(CudaBatchNorm, FusedReluBackwardFromAPackedMask) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (bool two_gradients : {false, true})
      for (DType t : {DType::f32, DType::f16}) {
        SCOPED_TRACE(shape_str(s) + (two_gradients ? " dy+dy_other " : " ") + std::string(dtype_name(t)));
        check_against_reference([&](DType d) { return bn_relu_backward(d, s, true, two_gradients, true); }, t,
                                {"brb.dconv", "brb.dgamma", "brb.dbeta", "brb.dresidual"}, 27);
      }
}

// The backward recomputing its relu mask from conv_out and the affine, on the vector and the
// scalar paths, with one and two incoming gradients.
TEST(CudaBatchNorm, FusedReluBackwardFromTheAffine) {
  TRIDENT_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (bool two_gradients : {false, true})
      for (DType t : {DType::f32, DType::f16}) {
        SCOPED_TRACE(shape_str(s) + (two_gradients ? " dy+dy_other " : " ") + std::string(dtype_name(t)));
        check_against_reference([&](DType d) { return bn_relu_backward(d, s, true, two_gradients, false, true); }, t,
                                {"brb.dconv", "brb.dgamma", "brb.dbeta", "brb.dresidual"}, 28);
      }
}

TEST(CudaBatchNorm, FoldIntoConvolutionWeights) {
  TRIDENT_REQUIRE_GPU();
  for (bool bias : {false, true})
    for (int64_t K : {3, 10, 64}) {
      SCOPED_TRACE("K " + std::to_string(K) + (bias ? " with bias" : ""));
      check_against_reference([&](DType d) {
        ir::Graph g;
        const Shape k{K};
        std::vector<int> in{g.add_parameter("w", {K, 3, 3, 5}, {}, d), g.add_parameter("gamma", k, {}, d),
                            g.add_parameter("beta", k, {}, d), g.add_state("running_mean", k, {}, d),
                            g.add_state("running_var", k, {}, d)};
        if (bias) in.push_back(g.add_parameter("b", k, {}, d));
        g.add_node("fold_batchnorm", in, {{"eps", 1e-5}}, "fold");
        return g;
      }, DType::f32, {"fold.w_folded", "fold.b_folded"}, 25);
    }
}

TEST(CudaBatchNorm, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph fwd = bn_forward(DType::f32, {32, 28, 28, 10}, true);
  for (const char* name : {"bn.y", "bn.saved_mean", "bn.saved_invstd", "running_var"})
    EXPECT_EQ(test_support::run_once_on_gpu(fwd, name, 26), test_support::run_once_on_gpu(fwd, name, 26)) << name;
  const ir::Graph bwd = bn_relu_backward(DType::f16, {8, 14, 14, 64}, true);
  for (const char* name : {"brb.dconv", "brb.dgamma", "brb.dbeta", "brb.dresidual"})
    EXPECT_EQ(test_support::run_once_on_gpu(bwd, name, 27), test_support::run_once_on_gpu(bwd, name, 27)) << name;
}

}  // namespace
}  // namespace trident
