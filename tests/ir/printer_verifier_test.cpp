// The text printer shows every node with its types; the verifier catches broken graphs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "frontend/builder.h"
#include "ir/graph.h"

using namespace trident;

TEST(Printer, ShowsNodesTypesAndNames) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {2, 8, 8, 3});
  g.mark_output(b.cbr(x, 4, 3, 1, 1, "block"));
  std::string text = ir::print(g);
  EXPECT_NE(text.find("input %0:f32[2,8,8,3]  # images"), std::string::npos) << text;
  EXPECT_NE(text.find("conv2d(%0, %1)"), std::string::npos) << text;
  EXPECT_NE(text.find("# block.conv"), std::string::npos) << text;
  EXPECT_NE(text.find("batchnorm2d"), std::string::npos);
  EXPECT_NE(text.find("relu"), std::string::npos);
  EXPECT_NE(text.find("outputs("), std::string::npos);
}

TEST(Verifier, AcceptsBuiltGraphsAndRejectsUseBeforeDefinition) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {1, 4, 4, 2});
  int y = b.relu(b.conv(x, 2, 3, 1, 1));
  g.mark_output(y);
  EXPECT_NO_THROW(ir::verify(g));
  std::vector<int> reversed(g.order().rbegin(), g.order().rend());
  g.set_order(reversed);
  EXPECT_THROW(ir::verify(g), Error);
}

TEST(Verifier, RejectsAShapeThatNoLongerMatchesInference) {
  ir::Graph g;
  int x = g.add_input("x", {1, 4});
  int y = g.add_node1("relu", {x}, {});
  g.mark_output(y);
  g.value(y).shape = {1, 5};
  EXPECT_THROW(ir::verify(g), Error);
}
