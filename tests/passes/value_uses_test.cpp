// ValueUses (passes/value_uses.h), the one answer the fusions share to "who else reads this
// value?": readers each once, graph outputs counted as consumers, and the single reader only
// when nothing else (no second node, no graph output) reads the value. Also the case it fixed
// in fuse_conv_epilogue: a conv → add whose sum is only a graph output fuses without reading a
// reader that is not there.
#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "passes/pass.h"
#include "passes/value_uses.h"
#include "support/graph_queries.h"

using namespace trident;
using test_support::count_op;

TEST(ValueUses, CountsReadersOnceAndGraphOutputsAsConsumers) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {2, 6, 6, 4});
  const int y = b.conv(x, 4, 3, 1, 1, {}, "conv");
  const int twice = b.add(y, y, "double");  // one node reading y twice is one reader
  const int r = b.relu(y, "relu");
  const int s = b.add(twice, r, "sum");
  g.set_outputs({s, r});
  const passes::ValueUses uses(g);

  EXPECT_EQ(uses.readers(y).size(), 2u);
  EXPECT_EQ(uses.consumers(y), 2u);
  EXPECT_EQ(uses.only_reader(y), -1);
  EXPECT_FALSE(uses.is_output(y));

  EXPECT_EQ(uses.only_reader(twice), g.value(s).producer);
  EXPECT_EQ(uses.consumers(twice), 1u);

  // Read by the sum and also a graph output: two consumers, no single reader.
  EXPECT_TRUE(uses.is_output(r));
  EXPECT_EQ(uses.consumers(r), 2u);
  EXPECT_EQ(uses.only_reader(r), -1);

  // Only a graph output: one consumer, but no reader to hand back.
  EXPECT_EQ(uses.consumers(s), 1u);
  EXPECT_TRUE(uses.readers(s).empty());
  EXPECT_EQ(uses.only_reader(s), -1);
}

TEST(ValueUses, AConvAddWhoseSumIsOnlyAGraphOutputFusesWithoutAReluOrAReaderAfterIt) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {2, 6, 6, 4});
  const int sum = b.add(b.conv(x, 4, 3, 1, 1, {}, "conv"), x, "add");
  g.mark_output(sum);
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  passes::PassContext ctx(o);
  passes::fuse_conv_epilogue(g, ctx);
  EXPECT_EQ(count_op(g, "conv2d_epilogue"), 1);
  EXPECT_EQ(count_op(g, "add"), 0);
  const ir::Node& fused = g.node(g.value(g.outputs()[0]).producer);
  EXPECT_EQ(fused.op, "conv2d_epilogue");
  EXPECT_EQ(fused.attrs.i("residual", 0), 1);
  EXPECT_EQ(fused.attrs.i("relu", 1), 0);
}
