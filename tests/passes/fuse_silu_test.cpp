// fuse_silu: PyTorch's exported SiLU, Mul(x, Sigmoid(x)), becomes one activation (fn silu) —
// either operand order, and the result is the pair's bits in f32 on cpu_ref (both round σ(x)
// and then x·σ(x)); a squeeze-excitation gate x·σ(s) is not a candidate; a sigmoid read
// elsewhere, a broadcasting mul and a graph output are refused with their reasons.
#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "passes/pass.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"

using namespace trident;
using test_support::count_op;

namespace {

struct Result {
  std::vector<passes::FusionRecord> fusions;
  std::vector<passes::Rejection> rejections;
};

Result fuse(ir::Graph& g) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Infer;
  passes::PassContext ctx(opt);
  passes::fuse_silu(g, ctx);
  ir::verify(g);
  return {ctx.fusions, ctx.rejections};
}

// conv → x·σ(x) (in `order`) → conv, and an SE-style gate x·σ(s) on the side.
ir::Graph block(bool sigmoid_first) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.conv(b.input("images", {2, 6, 6, 3}), 8, 3, 1, 1, {}, "conv1");
  const int s = b.activation(x, "sigmoid", "sigmoid1");
  const int y = sigmoid_first ? b.mul(s, x, "silu1") : b.mul(x, s, "silu1");
  const int z = b.conv(y, 8, 1, 1, 0, {}, "conv2");
  const int gate = b.activation(b.global_avgpool(z), "sigmoid", "gate");
  g.mark_output(b.conv(b.mul(z, gate, "scale"), 4, 1, 1, 0, {}, "conv3"));
  return g;
}

TEST(FuseSilu, ThePairBecomesOneActivationInEitherOrder) {
  for (bool sigmoid_first : {false, true}) {
    ir::Graph g = block(sigmoid_first);
    const Result r = fuse(g);
    ASSERT_EQ(r.fusions.size(), 1u);
    EXPECT_EQ(r.fusions[0].pattern, "x·sigmoid(x) → silu");
    EXPECT_TRUE(r.rejections.empty()) << r.rejections[0].reason;  // the gate is no candidate
    EXPECT_EQ(count_op(g, "mul"), 1);                               // the gate's
    EXPECT_EQ(count_op(g, "activation"), 2);
  }
}

TEST(FuseSilu, TheFusedGraphGivesThePairsBitsInF32) {
  const ir::Graph plain = block(false);
  ir::Graph fused = plain;
  fuse(fused);
  test_support::GraphRunner a(plain, "cpu_ref"), b(fused, "cpu_ref");
  a.randomize(3);
  b.randomize(3);
  a.run();
  b.run();
  const std::vector<double> ya = a.values(plain.outputs()[0]), yb = b.values(fused.outputs()[0]);
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(ya[i], yb[i]) << i;
}

TEST(FuseSilu, RefusesWithReasons) {
  {  // the sigmoid's output is read by the mul and by something else
    ir::Graph g;
    frontend::Builder b(g);
    const int x = b.input("x", {2, 4, 4, 8});
    const int s = b.activation(x, "sigmoid", "sigmoid");
    g.mark_output(b.add(b.mul(x, s, "silu"), s, "also"));
    const Result r = fuse(g);
    ASSERT_EQ(r.rejections.size(), 1u);
    EXPECT_EQ(r.rejections[0].reason, "the sigmoid's output 'sigmoid' has 2 consumers");
  }
  {  // the product is what the model returns
    ir::Graph g;
    frontend::Builder b(g);
    const int x = b.input("x", {2, 4, 4, 8});
    g.mark_output(b.mul(x, b.activation(x, "sigmoid", "sigmoid"), "silu"));
    const Result r = fuse(g);
    ASSERT_EQ(r.rejections.size(), 1u);
    EXPECT_NE(r.rejections[0].reason.find("is a graph output"), std::string::npos) << r.rejections[0].reason;
    EXPECT_EQ(count_op(g, "mul"), 1);
  }
}

}  // namespace
