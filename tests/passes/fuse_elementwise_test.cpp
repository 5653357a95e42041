// fuse_elementwise: vertical chains and horizontal siblings become one `elementwise` node;
// boundaries (reductions, several consumers) are refused with a reason; the fused kernel
// equals its decomposition.
#include <gtest/gtest.h>

#include "support/graph_queries.h"

#include "frontend/builder.h"
#include "runtime/executable.h"
#include "support/graph_runner.h"
#include "support/tolerance.h"

using namespace trident;
using test_support::count_op;

namespace {

struct Result {
  ir::Graph g;
  std::vector<passes::FusionRecord> fusions;
  std::vector<passes::Rejection> rejections;
};

Result fuse(ir::Graph g) {
  passes::CompileOptions o;
  passes::PassContext ctx(o);
  passes::fuse_elementwise(g, ctx);
  ir::verify(g);
  return {g, ctx.fusions, ctx.rejections};
}

}  // namespace

TEST(FuseElementwise, VerticalChainBecomesOneNode) {
  ir::Graph g;
  int x = g.add_input("x", {2, 5});
  int y = g.add_input("y", {2, 5});
  int a = g.add_node1("relu", {x}, {}, "r1");
  int b = g.add_node1("add", {y, a}, {}, "a1");  // the running value is the second operand
  g.mark_output(g.add_node1("relu", {b}, {}, "r2"));
  Result r = fuse(g);
  EXPECT_EQ(r.g.order().size(), 1u);
  ASSERT_EQ(r.fusions.size(), 1u);
  EXPECT_EQ(r.fusions[0].nodes, (std::vector<std::string>{"r1", "a1", "r2"}));
  const ir::Node& n = r.g.node(r.g.order()[0]);
  EXPECT_EQ(n.attrs.s("programs"), "relu,add:1,relu");
}

TEST(FuseElementwise, SiblingsReadingOneInputBecomeOneNode) {
  ir::Graph g;
  int x = g.add_input("x", {3, 4});
  int y = g.add_input("y", {3, 4});
  g.mark_output(g.add_node1("relu", {x}, {}, "s1"));
  g.mark_output(g.add_node1("add", {x, y}, {}, "s2"));
  Result r = fuse(g);
  EXPECT_EQ(count_op(r.g, "elementwise"), 1);
  EXPECT_EQ(r.g.node(r.g.order()[0]).outputs.size(), 2u);
  EXPECT_EQ(r.fusions.at(0).pattern, "elementwise-siblings");
}

TEST(FuseElementwise, StopsAtReductionsAndSharedValuesWithReasons) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {2, 4, 4, 3});
  int r = b.relu(x, "r1");
  int p = b.maxpool(r, 2, 2, 0, "pool");  // reduction after a lone relu
  int s = b.relu(p, "r2");
  g.mark_output(b.add(s, s, "twice"));    // r2's output is read twice
  Result res = fuse(g);
  EXPECT_EQ(count_op(res.g, "elementwise"), 0);
  ASSERT_GE(res.rejections.size(), 1u);
  EXPECT_NE(res.rejections[0].reason.find("reduction"), std::string::npos) << res.rejections[0].reason;
}

TEST(FuseElementwise, FusedKernelMatchesDecomposition) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", {4, 7}), g.add_input("y", {4, 7}), g.add_input("z", {4, 7})};
  const auto outs = g.add_node("elementwise", in, {{"programs", std::string("add:1,relu,add:2;relu")}}, "ew");
  ir::Graph d = g;
  d.set_order({});
  const auto dec = ir::OpRegistry::get("elementwise").decompose(d, g.node(g.value(outs[0]).producer));
  test_support::GraphRunner rf(g, "cpu_ref"), rd(d, "cpu_ref");
  rf.randomize(5);
  rd.randomize(5);
  rf.run();
  rd.run();
  for (size_t i = 0; i < outs.size(); ++i)
    test_support::expect_close(rf.values(outs[i]), rd.values(dec[i]), DType::f32, "elementwise");
}
