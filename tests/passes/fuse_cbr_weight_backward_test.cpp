// fuse_cbr_weight_backward, a first layer's batchnorm backward and weight gradient as one
// cbr_weight_backward, in three layers: structural (VGG16-BN's first layer on the GPU, whose
// dconv is then never a tensor; every other layer keeps its input gradient), negative (a window
// too wide for the one-pass kernel, as ResNet-50's 7×7 stem, f32 on the GPU, a layer whose dconv
// the input's gradient also reads, and the pass turned off), numerical (training steps with
// and without it bit for bit on the reference backend, which runs the decomposition). The cuda
// kernel is held to the decomposition in the op cases and in tests/gpu.
#include <gtest/gtest.h>

#include "core/error.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
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

Compiled training_graph(ir::Graph model, const std::string& backend, DType precision, bool fuse = true) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.precision = precision;
  if (backend == "cpu_ref") opt.cbr_weight_backward = 1;
  if (!fuse) opt.disabled_passes.push_back("fuse_cbr_weight_backward");
  return test_support::run_pipeline(std::move(model), opt, "fuse_cbr_weight_backward");
}

// A first layer of `in_ch` channels into 64 by a k×k window, then a second cbr and a classifier.
ir::Graph first_layer_network(int64_t batch, int64_t in_ch, int64_t k, int64_t stride) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, 9, 9, in_ch});
  x = b.cbr(x, 64, k, stride, k / 2, "first");
  x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "second"), 2, 2, 0, "pool");
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

}  // namespace

TEST(FuseCbrWeightBackward, Vgg16BnFirstLayerBackwardIsOnePassAndNoOtherLayerChanges) {
  const Compiled fused = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda", DType::f16);
  const Compiled plain = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda", DType::f16, false);
  const ir::Graph& g = fused.graph;
  ASSERT_EQ(count_op(g, "cbr_weight_backward"), 1);
  EXPECT_EQ(count_op(g, "conv2d_backward_weight"), count_op(plain.graph, "conv2d_backward_weight") - 1);
  EXPECT_EQ(count_op(g, "batchnorm_relu_backward"), count_op(plain.graph, "batchnorm_relu_backward") - 1);
  ASSERT_EQ(fused.fusions.size(), 1u);
  EXPECT_EQ(fused.fusions[0].nodes.size(), 2u);
  EXPECT_TRUE(fused.rejections.empty());
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op != "cbr_weight_backward") continue;
    namespace in = ops::cbr_weight_bwd_in;
    // The padded image is the convolution's input; dw is features.0's weight gradient.
    EXPECT_EQ(g.value(n.inputs[in::x]).shape, (Shape{2, 224, 224, 4}));
    EXPECT_EQ(g.value(n.outputs[ops::cbr_weight_bwd_out::dw]).shape, (Shape{64, 3, 3, 4}));
    EXPECT_EQ(g.value(n.outputs[ops::cbr_weight_bwd_out::dw]).dtype, DType::f16);
    EXPECT_EQ(n.name, "features.0.cbr.bn_relu_backward");
  }
  // features.0's weight gradient and batchnorm backward are gone; features.3's stay.
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op == "conv2d_backward_weight" || n.op == "batchnorm_relu_backward") {
      EXPECT_NE(n.name.rfind("features.0.", 0), 0u) << n.name << " (" << n.op << ")";
    }
  }
  // The pass ran after dead-code elimination and before the buffer-reuse passes.
  passes::CompileOptions gpu;
  gpu.backend = "cuda";
  gpu.precision = DType::f16;
  const passes::PassManager pipeline =
      passes::standard_pipeline(passes::Mode::Train, runtime::with_backend_traits(gpu));
  bool seen = false, has_pass = false;
  for (const auto& p : pipeline.passes()) {
    if (p.name == "dce") seen = true;
    if (p.name == "fuse_cbr_weight_backward") {
      has_pass = true;
      EXPECT_TRUE(seen) << "before dce, the input's gradient still reads dconv";
    }
  }
  EXPECT_TRUE(has_pass) << "the cuda backend's pipeline has the pass";
}

TEST(FuseCbrWeightBackward, RefusesWhatTheOnePassKernelDoesNotTakeWithTheReason) {
  const Compiled resnet = training_graph(frontend::build_model("resnet50", {.batch = 2}), "cuda", DType::f16);
  EXPECT_EQ(count_op(resnet.graph, "cbr_weight_backward"), 0);
  ASSERT_EQ(resnet.rejections.size(), 1u);
  EXPECT_EQ(resnet.rejections[0].node, "conv1.cbr.bn_relu_backward");
  EXPECT_NE(resnet.rejections[0].reason.find("R·S·C = 196"), std::string::npos) << resnet.rejections[0].reason;

  const Compiled fp32 = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda", DType::f32);
  EXPECT_EQ(count_op(fp32.graph, "cbr_weight_backward"), 0);
  ASSERT_EQ(fp32.rejections.size(), 1u);
  EXPECT_NE(fp32.rejections[0].reason.find("f16 or bf16"), std::string::npos) << fp32.rejections[0].reason;

  const Compiled wide = training_graph(first_layer_network(2, 16, 3, 1), "cpu_ref", DType::f32);
  ASSERT_EQ(wide.rejections.size(), 1u);
  EXPECT_NE(wide.rejections[0].reason.find("R·S·C = 144"), std::string::npos) << wide.rejections[0].reason;
}

TEST(FuseCbrWeightBackward, OnlyALayerWhoseInputTakesNoGradientIsACandidate) {
  // second's dconv also feeds the gradient of first's output: neither fused nor refused.
  const Compiled c = training_graph(first_layer_network(2, 4, 3, 1), "cpu_ref", DType::f32);
  ASSERT_EQ(c.fusions.size(), 1u);
  EXPECT_EQ(c.fusions[0].fused_node, "first.conv.cbr.bn_relu_backward");
  EXPECT_TRUE(c.rejections.empty());
  EXPECT_EQ(count_op(c.graph, "batchnorm_relu_backward"), 1);
  EXPECT_EQ(count_op(c.graph, "conv2d_backward_data"), 1);
}

TEST(FuseCbrWeightBackward, CanBeTurnedOffAndRunsOnlyWhereItsKernelsAre) {
  const Compiled off = training_graph(frontend::build_model("vgg16_bn", {.batch = 2}), "cuda", DType::f16, false);
  EXPECT_EQ(count_op(off.graph, "cbr_weight_backward"), 0);
  EXPECT_TRUE(off.fusions.empty());
  passes::CompileOptions cpu;
  cpu.mode = passes::Mode::Train;
  cpu.backend = "cpu";
  cpu = runtime::with_backend_traits(cpu);
  EXPECT_FALSE(cpu.fuses_cbr_weight_backward());
  cpu.cbr_weight_backward = 1;
  EXPECT_THROW(passes::standard_pipeline(cpu.mode, cpu), Error);
}

TEST(FuseCbrWeightBackward, TrainingStepsEqualTheStepsWithoutItBitForBit) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const ir::Graph model = first_layer_network(3, 4, 3, stride);
    auto compile = [&](bool fuse) {
      passes::CompileOptions opt;
      opt.mode = passes::Mode::Train;
      opt.backend = "cpu_ref";
      opt.cbr_weight_backward = fuse ? 1 : 0;
      return runtime::Executable::compile(model, opt);
    };
    auto fused = compile(true);
    auto plain = compile(false);
    EXPECT_EQ(count_op(fused->graph(), "cbr_weight_backward"), 1);
    EXPECT_EQ(count_op(plain->graph(), "cbr_weight_backward"), 0);
    test_support::expect_bitwise_same_steps(*fused, *plain, 2, 10);
  }
}
