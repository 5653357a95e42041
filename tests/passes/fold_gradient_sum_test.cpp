// fold_gradient_sum, in three layers: structural (a ResNet's block-output gradients lose their
// add), negative (a sum with another reader keeps it, with the reason), numerical (the backward
// with two gradients against its decomposition, and whole training steps with and without the
// pass, bit for bit on the reference backend).
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

int two_gradient_backwards(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order()) n += g.node(id).op == "batchnorm_relu_backward" && g.node(id).inputs.size() == 7;
  return n;
}

std::unique_ptr<runtime::Executable> compile_resnet(const std::vector<std::string>& disabled,
                                                    const std::string& backend = "cpu_ref") {
  const ir::Graph model = frontend::build_model("resnet_cifar", {.batch = 2});
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.disabled_passes = disabled;
  return runtime::Executable::compile(model, opt);
}

// The graph of one batchnorm_relu_backward whose dy is a sum of two gradients.
struct SumIntoBackward {
  ir::Graph g;
  int sum = -1;
};
SumIntoBackward sum_into_backward(DType d, bool residual) {
  SumIntoBackward s;
  const Shape act{3, 4, 3, 5}, c{5};
  const int y = s.g.add_input("y", act, d);
  s.sum = s.g.add_node1("add", {s.g.add_input("dy_a", act, d), s.g.add_input("dy_b", act, d)}, {}, "sum");
  s.g.add_node("batchnorm_relu_backward",
               {y, s.sum, s.g.add_input("conv_out", act, d), s.g.add_parameter("gamma", c, {}, d),
                s.g.add_parameter("saved_mean", c, {}, d), s.g.add_parameter("saved_invstd", c, {}, d)},
               {{"eps", 1e-5}, {"residual", int64_t{residual}}}, "bwd");
  return s;
}

passes::PassContext fold(ir::Graph& g, const passes::CompileOptions& opt) {
  passes::PassContext ctx(opt);
  passes::fold_gradient_sum(g, ctx);
  ir::verify(g);
  return ctx;
}

}  // namespace

TEST(FoldGradientSum, ResNetBlockOutputGradientsLoseTheirAdd) {
  auto folded = compile_resnet({});
  auto plain = compile_resnet({"fold_gradient_sum"});
  const int n = two_gradient_backwards(folded->graph());
  // resnet_cifar: every block output but the last feeds the next block's convolution and its
  // shortcut, so its gradient is a sum that the previous block's cbar backward now adds.
  EXPECT_GE(n, 2);
  EXPECT_EQ(two_gradient_backwards(plain->graph()), 0);
  EXPECT_EQ(count_op(plain->graph(), "add") + count_op(plain->graph(), "elementwise") -
                count_op(folded->graph(), "add") - count_op(folded->graph(), "elementwise"),
            n);
}

TEST(FoldGradientSum, ASumWithAnotherReaderIsKeptWithTheReason) {
  passes::CompileOptions opt;
  SumIntoBackward s = sum_into_backward(DType::f32, true);
  s.g.mark_output(s.sum);
  passes::PassContext ctx = fold(s.g, opt);
  EXPECT_EQ(two_gradient_backwards(s.g), 0);
  EXPECT_EQ(count_op(s.g, "add"), 1);
  ASSERT_EQ(ctx.rejections.size(), 1u);
  EXPECT_NE(ctx.rejections[0].reason.find("graph output"), std::string::npos) << ctx.rejections[0].reason;

  SumIntoBackward t = sum_into_backward(DType::f32, true);
  passes::PassContext folded = fold(t.g, opt);
  EXPECT_EQ(two_gradient_backwards(t.g), 1);
  EXPECT_EQ(count_op(t.g, "add"), 0);
  ASSERT_EQ(folded.fusions.size(), 1u);
  EXPECT_EQ(folded.fusions[0].pass, "fold_gradient_sum");
}

// The backward with two gradients equals its decomposition (add, relu backward, batchnorm
// backward) on the reference backend, with and without the residual output.
TEST(FoldGradientSum, TwoGradientBackwardEqualsItsDecomposition) {
  passes::CompileOptions opt;
  for (DType d : {DType::f64, DType::f32})
    for (bool residual : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + (residual ? " residual" : ""));
      SumIntoBackward s = sum_into_backward(d, residual);
      fold(s.g, opt);
      const int bwd_id = s.g.value(s.g.find_value("bwd.dconv")).producer;
      ASSERT_EQ(s.g.node(bwd_id).inputs.size(), 7u);
      const ir::Node fused = s.g.node(bwd_id);
      ir::Graph d_graph = s.g;
      d_graph.set_order({});
      const std::vector<int> dec = ir::OpRegistry::get(fused.op).decompose(d_graph, fused);
      test_support::GraphRunner rf(s.g, "cpu_ref"), rd(d_graph, "cpu_ref");
      rf.randomize(5);
      rd.randomize(5);
      rf.run();
      rd.run();
      for (size_t i = 0; i < fused.outputs.size(); ++i)
        EXPECT_EQ(rf.values(fused.outputs[i]), rd.values(dec[i])) << "output " << i;
    }
}

// Two training steps of a ResNet with and without the pass, on every host backend: the same
// arithmetic in the same order, so every parameter, momentum and running statistic is equal
// bit for bit.
class FoldGradientSumSteps : public ::testing::TestWithParam<std::string> {};

TEST_P(FoldGradientSumSteps, EqualTheUnfoldedStepsBitForBit) {
  const std::vector<std::string> available = KernelRegistry::backends();
  if (std::find(available.begin(), available.end(), GetParam()) == available.end())
    GTEST_SKIP() << "backend " << GetParam() << " is not built here";
  auto folded = compile_resnet({}, GetParam());
  auto plain = compile_resnet({"fold_gradient_sum"}, GetParam());
  ASSERT_GT(two_gradient_backwards(folded->graph()), 0);
  test_support::expect_bitwise_same_steps(*folded, *plain, 2, 10);
}

INSTANTIATE_TEST_SUITE_P(HostBackends, FoldGradientSumSteps, ::testing::Values("cpu_ref", "cpu"));
