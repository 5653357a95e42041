// defer_bn_apply, the cross-layer fusion of a cbr's batchnorm apply into the next
// convolution or indexed max pooling, in three layers: structural (which layers of ResNet-50 and VGG16-BN hand on
// their affine, and what every reader of the vanished output reads instead), negative (an
// output with another reader keeps it, with the reason; the oneDNN backend refuses the
// forms it has no kernels for), numerical (each new form against its decomposition, and
// whole training steps with and without the pass, bit for bit on the reference backend).
#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "ops/cbr_operands.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/error_of.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"
#include "support/pass_records.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

using Compiled = test_support::PassRecords;

// The training pipeline of the cuda backend (no kernels are built).
Compiled cuda_training_graph(const std::string& model, int64_t batch = 2, DType precision = DType::f16) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cuda";
  opt.precision = precision;
  return test_support::run_pipeline(frontend::build_model(model, {.batch = batch}), opt, "defer_bn_apply");
}

int with_prologue(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (int id : g.order()) n += g.node(id).op == op && g.node(id).attrs.i("prologue", 0) != 0;
  return n;
}

int affine_masked_backwards(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order()) {
    const ir::Node& node = g.node(id);
    n += node.op == "batchnorm_relu_backward" && g.value(node.inputs[0]).shape.size() == 2;
  }
  return n;
}

std::unique_ptr<runtime::Executable> compile_cpu_ref(const ir::Graph& model, bool defer) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.bn_apply_prologue = defer ? 1 : 0;
  return runtime::Executable::compile(model, opt);
}

ir::Attrs conv_bn_attrs() {
  return {{"stride", Shape{2, 2}}, {"padding", Shape{1, 1}}, {"eps", 1e-5}, {"momentum", 0.1}};
}

// Runs node `out`'s producer and its decomposition on cpu_ref from the same random inputs and
// expects every output equal bit for bit.
void expect_equals_decomposition(const ir::Graph& g, const std::vector<int>& out) {
  const ir::Node& n = g.node(g.value(out[0]).producer);
  ir::Graph dec = g;
  dec.set_order({});
  const std::vector<int> dec_out = ir::OpRegistry::get(n.op).decompose(dec, n);
  ASSERT_EQ(dec_out.size(), out.size());
  test_support::GraphRunner rf(g, "cpu_ref"), rd(dec, "cpu_ref");
  rf.randomize(5);
  rd.randomize(5);
  rf.run();
  rd.run();
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(rf.values(out[i]), rd.values(dec_out[i])) << n.op << " output " << i;
}

}  // namespace

TEST(DeferBnApply, ResNet50HandsOnTheAffineOfEveryBottleneckInnerLayer) {
  const Compiled c = cuda_training_graph("resnet50");
  const ir::Graph& g = c.graph;
  // conv1 and conv2 of the 16 bottlenecks; their readers are the 3×3 cbr and the last 1×1 cbar.
  // The stem, whose reader is the max pooling (it keeps a window index on the GPU). And the 4
  // projection shortcuts, whose batchnorm the block end applies.
  EXPECT_EQ(count_op(g, "conv_bn_stats"), 37);
  EXPECT_EQ(count_op(g, "batchnorm2d"), 0);
  size_t prologues = 0, shortcuts = 0;
  for (const auto& f : c.fusions) {
    prologues += f.pattern == "bn-apply-prologue";
    shortcuts += f.pattern == "shortcut-bn";
  }
  EXPECT_EQ(prologues, 33u);
  EXPECT_EQ(shortcuts, 4u);
  int dual = 0;
  for (int id : g.order()) dual += g.node(id).op == "cbar" && ops::has_residual_affine(g.node(id));
  EXPECT_EQ(dual, 4);
  EXPECT_EQ(with_prologue(g, "conv_bn_stats") + with_prologue(g, "cbr"), 16);
  EXPECT_EQ(with_prologue(g, "cbar"), 16);
  EXPECT_EQ(with_prologue(g, "conv2d_backward_weight"), 32);
  EXPECT_EQ(with_prologue(g, "maxpool2d"), 1);
  EXPECT_EQ(affine_masked_backwards(g), 33);
  // Only the stem's affine, which the pooling reads in f32, is kept exact.
  int exact = 0;
  for (int id : g.order()) exact += g.node(id).op == "conv_bn_stats" && g.node(id).attrs.i("exact_affine", 0) == 1;
  EXPECT_EQ(exact, 1);
  EXPECT_TRUE(c.rejections.empty()) << c.rejections[0].node << ": " << c.rejections[0].reason;
  // A deferred layer writes no relu mask (its backward recomputes it).
  for (int id : g.order())
    if (g.node(id).op == "conv_bn_stats") {
      EXPECT_EQ(g.node(id).outputs.size(), 6u);
      EXPECT_EQ(g.value(g.node(id).outputs[0]).shape.size(), 2u);
    }
}

// cuDNN fuses the prologue in f16 only: in bf16 the cbr layers keep their output (the apply
// would run twice), with the reason, while the shortcut batchnorms still move into the block ends.
TEST(DeferBnApply, Bf16KeepsTheOutputsAndStillAppliesTheShortcutsInTheBlockEnds) {
  const Compiled c = cuda_training_graph("resnet50", 2, DType::bf16);
  EXPECT_EQ(count_op(c.graph, "conv_bn_stats"), 4);
  EXPECT_EQ(c.fusions.size(), 4u);
  ASSERT_EQ(c.rejections.size(), 33u);
  EXPECT_NE(c.rejections[0].reason.find("f16 only"), std::string::npos) << c.rejections[0].reason;
}

TEST(DeferBnApply, Vgg16BnDefersEveryLayer) {
  const Compiled c = cuda_training_graph("vgg16_bn");
  // 13 layers in 5 stages; the last layer of each stage feeds a max pooling, which applies the
  // affine while it reads its windows.
  EXPECT_EQ(count_op(c.graph, "conv_bn_stats"), 13);
  EXPECT_EQ(with_prologue(c.graph, "maxpool2d"), 5);
  EXPECT_TRUE(c.rejections.empty());
  for (int id : c.graph.order())
    if (c.graph.node(id).op == "conv_bn_stats") {
      EXPECT_GE(ops::CbrOperands::of(c.graph.node(id)).bias, 0) << "VGG's convolutions carry a bias";
    }
}

TEST(DeferBnApply, AnOutputWithAnotherReaderIsKeptWithTheReason) {
  ir::Graph g;
  {
    frontend::Builder b(g);
    const int x = b.input("images", {2, 8, 8, 8});
    const int y = b.cbr(x, 16, 3, 1, 1, "shared");
    const int left = b.cbr(y, 16, 3, 1, 1, "left");
    const int right = b.cbr(y, 16, 1, 1, 0, "right");
    const int sum = b.add(left, right, "sum");
    g.mark_output(b.linear(b.flatten(b.global_avgpool(sum, "pool"), "flat"), 10, true, "fc"));
  }
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.bn_apply_prologue = 1;
  opt = runtime::with_backend_traits(opt);
  passes::PassContext ctx(opt);
  passes::standard_pipeline(opt.mode, opt).run(g, ctx);
  EXPECT_EQ(count_op(g, "conv_bn_stats"), 0);
  bool found = false;
  for (const auto& r : ctx.rejections)
    if (r.pass == "defer_bn_apply" && r.node.find("shared") != std::string::npos) {
      found = true;
      EXPECT_NE(r.reason.find("two convolutions"), std::string::npos) << r.reason;
    }
  EXPECT_TRUE(found);
}

TEST(DeferBnApply, TheOnednnBackendRefusesTheFormsItHasNoKernelsFor) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {.batch = 2});
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cpu";
  opt.bn_apply_prologue = 1;
  const std::string e = test_support::error_of([&] { runtime::Executable::compile(model, opt); });
  EXPECT_EQ(e, "defer_bn_apply makes forms that backend 'cpu' has no kernels for");
}

TEST(DeferBnApply, EachNewFormEqualsItsDecomposition) {
  for (DType d : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(d));
    const Shape x_shape{3, 7, 6, 4}, y_shape{3, 4, 3, 16};
    for (const std::string op : {"cbr", "cbar", "conv_bn_stats"})
      for (bool prologue : {false, true})
        for (bool bias : {false, true}) {
          if (op != "conv_bn_stats" && !prologue) continue;  // the plain forms have their own tests
          SCOPED_TRACE(op + (prologue ? " with prologue" : "") + (bias ? " with bias" : ""));
          ir::Graph g;
          std::vector<int> in{g.add_input("x", x_shape, d), g.add_parameter("w", {16, 3, 3, 4}, {}, d)};
          for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
            in.push_back(g.add_parameter(n, {16}, {}, d));
          if (op == "cbar") in.push_back(g.add_input("residual", y_shape, d));
          if (bias) in.push_back(g.add_parameter("b", {16}, {}, d));
          ir::Attrs a = conv_bn_attrs();
          if (prologue) {
            in.push_back(g.add_input("x_affine", {2, 4}));
            a.set("prologue", int64_t{1});
          }
          expect_equals_decomposition(g, g.add_node(op, in, a, "fused"));
        }
    for (bool prologue : {false, true}) {
      SCOPED_TRACE(std::string("cbar with a residual affine") + (prologue ? " and a prologue" : ""));
      ir::Graph g;
      std::vector<int> in{g.add_input("x", x_shape, d), g.add_parameter("w", {16, 3, 3, 4}, {}, d)};
      for (const char* n : {"gamma", "beta", "running_mean", "running_var"}) in.push_back(g.add_parameter(n, {16}, {}, d));
      in.push_back(g.add_input("residual", y_shape, d));
      ir::Attrs a = conv_bn_attrs();
      if (prologue) {
        in.push_back(g.add_input("x_affine", {2, 4}));
        a.set("prologue", int64_t{1});
      }
      in.push_back(g.add_input("residual_affine", {2, 16}));
      a.set("residual_affine", int64_t{1});
      expect_equals_decomposition(g, g.add_node("cbar", in, a, "fused"));
    }
    {
      SCOPED_TRACE("conv2d_backward_weight with prologue");
      ir::Graph g;
      const int x = g.add_input("x", x_shape, d), dy = g.add_input("dy", y_shape, d);
      ir::Attrs a = conv_bn_attrs();
      a.set("weight_shape", Shape{16, 3, 3, 4});
      a.set("has_bias", int64_t{1});
      a.set("prologue", int64_t{1});
      expect_equals_decomposition(g, g.add_node("conv2d_backward_weight", {x, dy, g.add_input("x_affine", {2, 4})}, a, "wgrad"));
    }
    {
      SCOPED_TRACE("maxpool2d with prologue, keeping its window index");
      ir::Graph g;
      const ir::Attrs a{{"kernel", Shape{3, 3}}, {"stride", Shape{2, 2}}, {"padding", Shape{1, 1}},
                        {"window_index", int64_t{1}}, {"prologue", int64_t{1}}};
      expect_equals_decomposition(g, g.add_node("maxpool2d", {g.add_input("x", y_shape, d), g.add_input("x_affine", {2, 16})}, a, "pool"));
    }
    for (bool two : {false, true}) {
      SCOPED_TRACE(std::string("batchnorm_relu_backward with the affine as its mask") + (two ? ", two gradients" : ""));
      ir::Graph g;
      std::vector<int> in{g.add_input("affine", {2, 16}), g.add_input("dy", y_shape, d), g.add_input("conv_out", y_shape, d),
                          g.add_parameter("gamma", {16}, {}, d), g.add_input("saved_mean", {16}, d),
                          g.add_input("saved_invstd", {16}, d)};
      if (two) in.push_back(g.add_input("dy_other", y_shape, d));
      expect_equals_decomposition(g, g.add_node("batchnorm_relu_backward", in, {{"eps", 1e-5}}, "bwd"));
    }
  }
}

TEST(DeferBnApply, TrainingStepsEqualTheStepsWithoutItBitForBit) {
  const ir::Graph resnet = frontend::build_model("resnet_cifar", {.batch = 2});
  auto deferred = compile_cpu_ref(resnet, true);
  auto plain = compile_cpu_ref(resnet, false);
  ASSERT_GT(count_op(deferred->graph(), "conv_bn_stats"), 0);
  EXPECT_EQ(count_op(plain->graph(), "conv_bn_stats"), 0);
  int dual = 0;  // resnet_cifar's two projection shortcuts
  for (int id : deferred->graph().order()) dual += ops::has_residual_affine(deferred->graph().node(id));
  EXPECT_EQ(dual, 2);
  test_support::expect_bitwise_same_steps(*deferred, *plain, 2, 10);
}

TEST(DeferBnApply, ChainsOfDeferredLayersWithBiasTrainBitForBit) {
  // conv(bias) → bn → relu three times, then a pooling: the middle layer both reads through a
  // prologue and hands its own affine on.
  ir::Graph g;
  {
    frontend::Builder b(g);
    int x = b.input("images", {2, 8, 8, 3});
    for (int i = 0; i < 3; ++i) {
      x = b.conv(x, 8, 3, 1, 1, {.bias = true}, "conv" + std::to_string(i));
      x = b.relu(b.batchnorm(x, "bn" + std::to_string(i)), "relu" + std::to_string(i));
    }
    x = b.flatten(b.global_avgpool(x, "pool"), "flat");
    g.mark_output(b.linear(x, 10, true, "fc"));
  }
  auto deferred = compile_cpu_ref(g, true);
  auto plain = compile_cpu_ref(g, false);
  EXPECT_EQ(count_op(deferred->graph(), "conv_bn_stats"), 2);
  EXPECT_EQ(with_prologue(deferred->graph(), "conv_bn_stats"), 1);
  test_support::expect_bitwise_same_steps(*deferred, *plain, 2, 10);
}

TEST(DeferBnApply, AStemWhoseMaxPoolingAppliesItsBatchnormTrainsBitForBit) {
  // cbr → max pooling (window index) → cbr → max pooling: both poolings read the raw
  // convolution outputs through the affine, and the backwards recompute the relu masks.
  ir::Graph g;
  {
    frontend::Builder b(g);
    int x = b.input("images", {2, 17, 17, 3});
    x = b.maxpool(b.cbr(x, 8, 3, 1, 1, "stem"), 3, 2, 1, "stem_pool");
    x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "mid"), 2, 2, 0, "mid_pool");
    g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  }
  auto with_index = [&](bool defer) {
    passes::CompileOptions opt;
    opt.mode = passes::Mode::Train;
    opt.bn_apply_prologue = defer ? 1 : 0;
    opt.maxpool_window_index = 1;
    return runtime::Executable::compile(g, opt);
  };
  auto deferred = with_index(true);
  auto plain = with_index(false);
  EXPECT_EQ(with_prologue(deferred->graph(), "maxpool2d"), 2);
  EXPECT_EQ(count_op(deferred->graph(), "relu_mask"), 0);
  test_support::expect_bitwise_same_steps(*deferred, *plain, 2, 10);
}
