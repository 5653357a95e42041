// fold_maxpool_gradient, the batchnorm backward that routes a max pooling's gradient through
// the window index itself, in three layers: structural (VGG16-BN's five poolings leave no
// maxpool2d_index_backward on the GPU; the routed gradient is never a tensor), negative
// (overlapping windows, as ResNet-50's stem pooling, and a backward that also adds a second
// gradient keep reading the written one, with the reason; the oneDNN backend keeps no window
// index, so nothing is folded there; the pass can be turned off), numerical (training steps
// with and without it, bit for bit on the reference backend, over tiling windows on even and
// odd sizes and with ceil_mode). The cuda kernels are held to the reference in the op cases
// and to the unfused steps bit for bit in tests/gpu.
#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/cbr_operands.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/pass_records.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

using Compiled = test_support::PassRecords;

Compiled training_graph(ir::Graph model, const std::string& backend, bool fold = true) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  if (backend == "cuda") opt.precision = DType::f16;
  if (backend == "cpu_ref") opt.maxpool_window_index = 1;
  if (!fold) opt.disabled_passes.push_back("fold_maxpool_gradient");
  return test_support::run_pipeline(std::move(model), opt, "fold_maxpool_gradient");
}

// The batchnorm backwards that route a pooled gradient.
std::vector<const ir::Node*> routing_backwards(const ir::Graph& g) {
  std::vector<const ir::Node*> found;
  for (int id : g.order())
    if (g.node(id).op == "batchnorm_relu_backward" && ops::BnReluBackwardStages::dy_of(g.node(id)) == ops::BnReluBackwardStages::Dy::pooled) found.push_back(&g.node(id));
  return found;
}

// Convolutions, then poolings whose windows tile their input — 2×2 on an even and an odd
// size (the last row and column in no window), 3×3 with ceil_mode overhanging the edge — and
// one overlapping padded pooling (the ResNet stem's), which keeps its written gradient.
ir::Graph pooling_network(int64_t batch) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, 14, 14, 3});
  x = b.maxpool(b.cbr(x, 8, 3, 1, 1, "stem"), 2, 2, 0, "even_pool");  // 14 → 7
  x = b.maxpool(b.cbr(x, 8, 3, 1, 1, "mid"), 2, 2, 0, "odd_pool");    // 7 → 3
  x = b.cbr(x, 16, 3, 1, 1, "wide");
  x = g.add_node1("maxpool2d", {x},
                  {{"kernel", Shape{2, 2}}, {"stride", Shape{2, 2}}, {"padding", Shape{0, 0}}, {"ceil_mode", int64_t{1}}},
                  "ceil_pool");  // 3 → 2
  x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "last"), 3, 2, 1, "overlapping_pool");  // 2 → 1
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

}  // namespace

TEST(FoldMaxpoolGradient, EveryVgg16BnPoolingGradientIsRoutedByTheBatchnormBackwardBeforeIt) {
  const Compiled c = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda");
  const ir::Graph& g = c.graph;
  EXPECT_EQ(count_op(g, "maxpool2d_index_backward"), 0);
  EXPECT_EQ(c.fusions.size(), 5u);
  EXPECT_TRUE(c.rejections.empty());
  const std::vector<const ir::Node*> routed = routing_backwards(g);
  ASSERT_EQ(routed.size(), 5u);
  namespace in = ops::bn_relu_bwd_in;
  for (const ir::Node* n : routed) {
    // dy is the pooled gradient, a quarter of the conv output under the 2×2 windows, and the
    // last input the pooling's window index.
    const Shape& dy = g.value(n->inputs[in::dy]).shape;
    const Shape& x = g.value(n->inputs[in::conv_out]).shape;
    EXPECT_EQ(dy, (Shape{x[0], x[1] / 2, x[2] / 2, x[3]})) << n->name;
    ASSERT_EQ(n->inputs.size(), in::dy_window_index + 1);
    EXPECT_EQ(g.node(g.value(n->inputs[in::dy_window_index]).producer).op, "maxpool2d") << n->name;
    EXPECT_NE(ops::BnReluBackwardStages::dy_of(*n), ops::BnReluBackwardStages::Dy::plus_other);
  }
}

TEST(FoldMaxpoolGradient, OverlappingWindowsKeepTheWrittenGradientWithTheReason) {
  const Compiled r = training_graph(frontend::build_model("resnet50", {.batch = 2}), "cuda");
  EXPECT_EQ(count_op(r.graph, "maxpool2d_index_backward"), 1);
  EXPECT_TRUE(r.fusions.empty());
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_NE(r.rejections[0].reason.find("windows overlap"), std::string::npos) << r.rejections[0].reason;
  const Compiled c = training_graph(pooling_network(2), "cpu_ref");
  EXPECT_EQ(routing_backwards(c.graph).size(), 3u);
  ASSERT_EQ(c.rejections.size(), 1u);
  EXPECT_EQ(c.rejections[0].node, "overlapping_pool.backward");
}

TEST(FoldMaxpoolGradient, CanBeTurnedOffAndFindsNothingOnTheOnednnBackend) {
  const Compiled off = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda", false);
  EXPECT_EQ(count_op(off.graph, "maxpool2d_index_backward"), 5);
  EXPECT_TRUE(routing_backwards(off.graph).empty());
  const Compiled cpu = training_graph(pooling_network(2), "cpu");
  EXPECT_TRUE(routing_backwards(cpu.graph).empty());
  EXPECT_TRUE(cpu.fusions.empty());
}

// A layer whose output a pooling and a convolution both read: its backward adds the
// convolution's gradient to the pooling's (fold_gradient_sum), so the pooling's gradient is
// written as before, and the refusal says why.
TEST(FoldMaxpoolGradient, ABackwardThatAlsoAddsASecondGradientKeepsTheWrittenOne) {
  ir::Graph g;
  {
    frontend::Builder b(g);
    const int x = b.input("images", {2, 8, 8, 8});
    const int y = b.cbr(x, 8, 3, 1, 1, "conv");
    const int pooled = b.maxpool(y, 2, 2, 0, "pool");
    const int side = b.maxpool(b.cbr(y, 8, 3, 1, 1, "side"), 2, 2, 0, "side_pool");
    g.mark_output(b.linear(b.flatten(b.add(pooled, side, "join"), "flat"), 10, true, "fc"));
  }
  const Compiled c = training_graph(std::move(g), "cpu_ref");
  EXPECT_EQ(count_op(c.graph, "maxpool2d_index_backward"), 1);
  ASSERT_EQ(c.fusions.size(), 1u);  // side's own pooling
  ASSERT_EQ(c.rejections.size(), 1u);
  EXPECT_EQ(c.rejections[0].reason, "the backward also adds a second gradient");
}

TEST(FoldMaxpoolGradient, TrainingStepsEqualTheStepsWithoutItBitForBit) {
  const ir::Graph model = pooling_network(3);
  auto compile = [&](bool fold) {
    passes::CompileOptions opt;
    opt.mode = passes::Mode::Train;
    opt.maxpool_window_index = 1;
    if (!fold) opt.disabled_passes.push_back("fold_maxpool_gradient");
    return runtime::Executable::compile(model, opt);
  };
  auto routed = compile(true);
  auto plain = compile(false);
  EXPECT_EQ(routing_backwards(routed->graph()).size(), 3u);
  EXPECT_EQ(count_op(routed->graph(), "maxpool2d_index_backward"), 1);  // the overlapping pooling's
  EXPECT_EQ(count_op(plain->graph(), "maxpool2d_index_backward"), 4);
  test_support::expect_bitwise_same_steps(*routed, *plain, 2, 10);
}
