// save_maxpool_index, the one-byte window index a training max pooling keeps for its backward,
// in three layers: structural (ResNet-50's stem pooling and VGG16-BN's five keep an index and
// their backward reads it, so nothing but the pooling reads the stem's output), negative (a
// window of more cells than a byte names keeps reading x, with the reason; the oneDNN backend
// refuses the pass), numerical (training steps with and without it, bit for bit on the
// reference backend, over overlapping, tiling, padded and ceil_mode windows).
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/error_of.h"
#include "support/graph_queries.h"
#include "support/pass_records.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

using Compiled = test_support::PassRecords;

Compiled training_graph(ir::Graph model, const std::string& backend, int index = -1) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.maxpool_window_index = index;
  if (backend == "cuda") opt.precision = DType::f16;
  // The index's backward stays a node of its own (fold_maxpool_gradient has its own tests).
  opt.disabled_passes.push_back("fold_maxpool_gradient");
  return test_support::run_pipeline(std::move(model), opt, "save_maxpool_index");
}

// Nodes other than the max pooling that read value `v`.
int other_readers(const ir::Graph& g, int v) {
  int n = 0;
  for (int id : g.order()) {
    const ir::Node& node = g.node(id);
    if (node.op == "maxpool2d") continue;
    n += static_cast<int>(std::count(node.inputs.begin(), node.inputs.end(), v));
  }
  return n;
}

// Convolutions, then poolings of every kind of window: overlapping with padding (the ResNet
// stem's), tiling (VGG's), and overhanging with ceil_mode.
ir::Graph pooling_network(int64_t batch) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, 13, 13, 3});
  x = b.cbr(x, 8, 3, 1, 1, "stem");
  x = b.maxpool(x, 3, 2, 1, "stem_pool");  // 13 → 7
  x = b.cbr(x, 8, 3, 1, 1, "mid");
  x = g.add_node1("maxpool2d", {x},
                  {{"kernel", Shape{3, 3}}, {"stride", Shape{2, 2}}, {"padding", Shape{0, 0}}, {"ceil_mode", int64_t{1}}},
                  "ceil_pool");  // 7 → 3
  x = b.cbr(x, 16, 3, 1, 1, "last");
  x = b.maxpool(x, 2, 2, 0, "tile_pool");  // 3 → 1
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

std::unique_ptr<runtime::Executable> compile_cpu_ref(const ir::Graph& model, bool index) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.maxpool_window_index = index ? 1 : 0;
  if (index) opt.disabled_passes.push_back("fold_maxpool_gradient");
  return runtime::Executable::compile(model, opt);
}

}  // namespace

TEST(SaveMaxpoolIndex, TheResNet50StemPoolingKeepsAnIndexAndItsInputDiesAtOnce) {
  const Compiled c = training_graph(frontend::build_model("resnet50", {.batch = 2}), "cuda");
  const ir::Graph& g = c.graph;
  EXPECT_EQ(count_op(g, "maxpool2d_backward"), 0);
  EXPECT_EQ(count_op(g, "maxpool2d_index_backward"), 1);
  ASSERT_EQ(c.fusions.size(), 1u);
  EXPECT_TRUE(c.rejections.empty());
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op != "maxpool2d") continue;
    ASSERT_EQ(n.outputs.size(), 2u);
    EXPECT_EQ(g.value(n.outputs[1]).dtype, DType::i32);
    EXPECT_EQ(g.value(n.outputs[1]).shape, (Shape{2 * 56 * 56 * 64 / 4}));
    // The pooling's backward reads the index, not the pooling's input. On the GPU in f16 that
    // input is the stem's raw convolution output, read through its affine (defer_bn_apply), whose
    // only other reader is the stem's batchnorm backward; the activated tensor never exists.
    ASSERT_EQ(n.attrs.i("prologue", 0), 1);
    EXPECT_EQ(other_readers(g, n.inputs[0]), 1) << g.value(n.inputs[0]).name;
    EXPECT_EQ(g.node(g.value(n.inputs[0]).producer).op, "conv_bn_stats");
  }
}

TEST(SaveMaxpoolIndex, EveryVgg16BnPoolingKeepsAnIndex) {
  const Compiled c = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda");
  EXPECT_EQ(count_op(c.graph, "maxpool2d_backward"), 0);
  EXPECT_EQ(count_op(c.graph, "maxpool2d_index_backward"), 5);
  EXPECT_EQ(c.fusions.size(), 5u);
}

TEST(SaveMaxpoolIndex, IsOffOnTheReferenceBackendUnlessAskedAndRefusedOnOnednn) {
  EXPECT_EQ(count_op(training_graph(pooling_network(2), "cpu_ref").graph, "maxpool2d_index_backward"), 0);
  EXPECT_EQ(count_op(training_graph(pooling_network(2), "cpu").graph, "maxpool2d_index_backward"), 0);
  EXPECT_EQ(test_support::error_of([] { training_graph(pooling_network(2), "cpu", 1); }),
            "save_maxpool_index makes forms that backend 'cpu' has no kernels for");
}

TEST(SaveMaxpoolIndex, AWindowOfMoreCellsThanAByteNamesKeepsReadingItsInput) {
  ir::Graph g;
  {
    frontend::Builder b(g);
    const int x = b.input("images", {2, 16, 16, 8});
    const int y = b.maxpool(b.cbr(x, 8, 3, 1, 1, "conv"), 16, 16, 0, "global_max");  // 256 cells
    g.mark_output(b.linear(b.flatten(y, "flat"), 10, true, "fc"));
  }
  const Compiled c = training_graph(std::move(g), "cpu_ref", 1);
  EXPECT_EQ(count_op(c.graph, "maxpool2d_backward"), 1);
  EXPECT_EQ(count_op(c.graph, "maxpool2d_index_backward"), 0);
  ASSERT_EQ(c.rejections.size(), 1u);
  EXPECT_NE(c.rejections[0].reason.find("255 cells"), std::string::npos) << c.rejections[0].reason;
}

TEST(SaveMaxpoolIndex, TrainingStepsEqualTheStepsWithoutItBitForBit) {
  const ir::Graph model = pooling_network(3);
  auto indexed = compile_cpu_ref(model, true);
  auto plain = compile_cpu_ref(model, false);
  EXPECT_EQ(count_op(indexed->graph(), "maxpool2d_index_backward"), 3);
  EXPECT_EQ(count_op(plain->graph(), "maxpool2d_index_backward"), 0);
  test_support::expect_bitwise_same_steps(*indexed, *plain, 2, 10);
}
