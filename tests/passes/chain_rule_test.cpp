// The fusion machinery every chain fusion shares: replace_nodes (passes/graph_edit.h) puts the
// new nodes where the chain's last node ran and takes the chain out of the order, and
// apply_chain_rule (passes/chain_rule.h) visits every anchor in order, fuses the legal
// candidates, records each refusal with its pattern and sentence, and skips anchors that are
// no candidate — here with a toy rule (relu → relu into one relu) on a small graph, so the
// loop is checked apart from the real rules, whose own tests compare each fused form with its
// decomposition.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/builder.h"
#include "passes/chain_rule.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "support/graph_queries.h"

using namespace trident;
using test_support::count_op;

namespace {

struct Pair {
  int first = -1, second = -1;
};

// relu → relu (the first relu's output read by the second alone) becomes one relu.
passes::ChainRule<Pair> double_relu_rule() {
  passes::ChainRule<Pair> rule;
  rule.pass = "toy";
  rule.anchor_op = "relu";
  rule.candidate = [](const ir::Graph& g, const passes::ValueUses& uses, int id) {
    const std::vector<int>& readers = uses.readers(g.node(id).outputs[0]);
    return !readers.empty() && g.node(readers[0]).op == "relu";
  };
  rule.refusal = [](const ir::Graph& g, const passes::ValueUses& uses, int id, Pair& p) -> std::string {
    p.first = id;
    const int v = g.node(id).outputs[0];
    if (uses.only_reader(v) < 0) return "the first relu's output has " + std::to_string(uses.consumers(v)) + " consumers";
    p.second = uses.only_reader(v);
    return "";
  };
  rule.pattern = [](const Pair&) -> std::string { return "relu-relu"; };
  rule.build = [](ir::Graph& g, const Pair& p) {
    const ir::Node first = g.node(p.first), second = g.node(p.second);
    const int out = g.add_node1("relu", {first.inputs[0]}, {}, first.name + ".twice");
    g.replace_uses(second.outputs[0], out);
    passes::replace_nodes(g, {g.value(out).producer}, second.id, {first.id, second.id});
    return passes::FusionRecord{"toy", "relu-relu", first.name + ".twice", {first.name, second.name}};
  };
  return rule;
}

std::vector<std::string> order_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (int id : g.order()) names.push_back(g.node(id).name);
  return names;
}

}  // namespace

TEST(GraphEdit, NewNodesRunWhereTheReplacedChainEndedAndTheChainLeavesTheOrder) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {1, 2, 2, 4});
  const int a = b.relu(x, "a");
  const int c = b.relu(a, "c");
  const int d = b.add(c, x, "d");
  g.mark_output(d);
  const int made1 = g.value(g.add_node1("relu", {x}, {}, "made1")).producer;
  const int made2 = g.value(g.add_node1("relu", {x}, {}, "made2")).producer;
  EXPECT_EQ(passes::order_position(g, made2), g.order().size() - 1);
  passes::replace_nodes(g, {made1, made2}, g.value(c).producer, {g.value(a).producer, g.value(c).producer});
  EXPECT_EQ(order_names(g), (std::vector<std::string>{"made1", "made2", "d"}));
  EXPECT_EQ(passes::order_position(g, g.value(a).producer), g.order().size());  // no longer runs
}

TEST(ChainRule, FusesLegalCandidatesRefusesOthersWithTheirReasonAndSkipsNonCandidates) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {1, 2, 2, 4});
  const int fused = b.relu(b.relu(x, "r1"), "r2");  // a legal pair
  const int shared = b.relu(x, "r3");                // read by r4 and by the sum: refused
  const int sum = b.add(b.relu(shared, "r4"), shared, "sum");
  const int lone = b.relu(b.add(fused, sum, "join"), "r5");  // its reader is no relu: no candidate
  g.mark_output(lone);
  passes::CompileOptions o;
  passes::PassContext ctx(o);
  passes::apply_chain_rule(g, ctx, double_relu_rule());

  ASSERT_EQ(ctx.fusions.size(), 1u);
  EXPECT_EQ(ctx.fusions[0].fused_node, "r1.twice");
  EXPECT_EQ(ctx.fusions[0].nodes, (std::vector<std::string>{"r1", "r2"}));
  ASSERT_EQ(ctx.rejections.size(), 1u);
  EXPECT_EQ(ctx.rejections[0].pass, "toy");
  EXPECT_EQ(ctx.rejections[0].pattern, "relu-relu");
  EXPECT_EQ(ctx.rejections[0].node, "r3");
  EXPECT_EQ(ctx.rejections[0].reason, "the first relu's output has 2 consumers");
  // r1 and r2 left the order; their fused relu runs where r2 ran, before anything reads it.
  const std::vector<std::string> names = order_names(g);
  EXPECT_EQ(std::count(names.begin(), names.end(), "r1"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "r2"), 0);
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  EXPECT_LT(at("r1.twice"), at("join"));
  EXPECT_EQ(count_op(g, "relu"), 4);  // r1.twice, r3, r4, r5
}
