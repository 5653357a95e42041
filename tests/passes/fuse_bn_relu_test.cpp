// fuse_bn_relu, the pre-activation fusion, in three layers: structural (a DenseNet dense layer
// and a pre-activation residual block after the pass), negative (what must block it, with
// the reason), numerical (a whole training step of a pre-activation network fused against the
// same network with the pass disabled, on cpu_ref in f64 and on cpu in f32: the loss, every
// parameter gradient, and after two SGD steps every parameter, momentum and running statistic).
#include <gtest/gtest.h>

#include "backends/kernel.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "ir/op_registry.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/tolerance.h"

using namespace trident;
using test_support::count_op;

namespace {

constexpr const char* kPreActivation = "bn → relu → conv (pre-activation)";
constexpr const char* kPlain = "bn → relu";

struct PassResult {
  std::vector<passes::FusionRecord> fusions;
  std::vector<passes::Rejection> rejections;
};

// The training pipeline's two fusions of batchnorms, in their order.
PassResult run_fusions(ir::Graph& g, passes::Mode mode = passes::Mode::Train) {
  passes::CompileOptions opt;
  opt.mode = mode;
  passes::PassContext ctx(opt);
  if (mode == passes::Mode::Train) passes::fuse_conv_bn_relu(g, ctx);
  passes::fuse_bn_relu(g, ctx);
  ir::verify(g);
  PassResult r;
  for (const auto& f : ctx.fusions)
    if (f.pass == "fuse_bn_relu") r.fusions.push_back(f);
  for (const auto& j : ctx.rejections)
    if (j.pass == "fuse_bn_relu") r.rejections.push_back(j);
  return r;
}

// DenseNet's dense layer: BN → ReLU → conv1×1 → BN → ReLU → conv3×3, joined to its input.
ir::Graph dense_layer() {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 8});
  const int bottleneck = b.conv(b.relu(b.batchnorm(x, "norm1"), "relu1"), 16, 1, 1, 0, {}, "conv1");
  const int grown = b.conv(b.relu(b.batchnorm(bottleneck, "norm2"), "relu2"), 4, 3, 1, 1, {}, "conv2");
  g.mark_output(g.add_node1("concat", {x, grown}, {}, "concat"));
  return g;
}

// A pre-activation residual block after a stem, and a final bn → relu before the pooling.
ir::Graph preact_network(DType dtype) {
  ir::Graph g;
  frontend::Builder b(g, dtype);
  const int x = b.input("images", {4, 6, 6, 3}, dtype);
  const int stem = b.cbr(x, 8, 3, 1, 1, "stem");
  b.push("block");
  const int c1 = b.conv(b.relu(b.batchnorm(stem, "bn1"), "relu1"), 8, 1, 1, 0, {}, "conv1");
  const int c2 = b.conv(b.relu(b.batchnorm(c1, "bn2"), "relu2"), 8, 3, 1, 1, {.bias = true}, "conv2");
  const int sum = b.add(c2, stem, "add");
  b.pop();
  const int out = b.relu(b.batchnorm(sum, "bn_out"), "relu_out");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(out)), 5, true, "fc"));
  return g;
}

const ir::Node* node_named(const ir::Graph& g, const std::string& name) {
  for (int id : g.order())
    if (g.node(id).name == name) return &g.node(id);
  return nullptr;
}

}  // namespace

TEST(FuseBnRelu, DenseLayerBecomesBnReluCbrConv) {
  ir::Graph g = dense_layer();
  const size_t before = g.order().size();  // 2 bn, 2 relu, 2 conv, concat
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 1);    // norm1 + relu1: the input is no convolution
  EXPECT_EQ(count_op(g, "cbr"), 1);        // conv1 + norm2 + relu2: cbr wins
  EXPECT_EQ(count_op(g, "conv2d"), 1);
  EXPECT_EQ(count_op(g, "concat"), 1);
  EXPECT_EQ(count_op(g, "batchnorm2d") + count_op(g, "relu"), 0);
  EXPECT_EQ(g.order().size(), before - 3);
  ASSERT_EQ(r.fusions.size(), 1u);
  EXPECT_EQ(r.fusions[0].pattern, kPreActivation);
  EXPECT_EQ(r.fusions[0].fused_node, "norm1.bn_relu");
  EXPECT_EQ(r.fusions[0].nodes, (std::vector<std::string>{"norm1", "relu1"}));
  EXPECT_TRUE(r.rejections.empty());
  const ir::Node* fused = node_named(g, "norm1.bn_relu");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->inputs[0], g.find_value("x"));
  EXPECT_EQ(fused->attrs.i("training", 0), 1);
  EXPECT_EQ(fused->outputs.size(), 5u);  // y, saved mean and inverse std, running statistics
}

TEST(FuseBnRelu, PreActivationBlockKeepsCbrAndNamesTheTailPlainly) {
  ir::Graph g = preact_network(DType::f32);
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 2);  // bn1 (before conv1) and bn_out (before the pooling)
  EXPECT_EQ(count_op(g, "cbr"), 2);      // the stem and conv1 + bn2 + relu2
  EXPECT_EQ(count_op(g, "batchnorm2d") + count_op(g, "relu"), 0);
  ASSERT_EQ(r.fusions.size(), 2u);
  EXPECT_EQ(r.fusions[0].pattern, kPreActivation);
  EXPECT_EQ(r.fusions[0].nodes, (std::vector<std::string>{"block.bn1", "block.relu1"}));
  EXPECT_EQ(r.fusions[1].pattern, kPlain);
  EXPECT_EQ(r.fusions[1].nodes, (std::vector<std::string>{"bn_out", "relu_out"}));
}

TEST(FuseBnRelu, InferenceFusesWhatFoldBnLeaves) {
  const auto compiled = runtime::compile_graph(dense_layer(), runtime::default_compile_options(passes::Mode::Infer));
  const ir::Graph& g = compiled.graph;
  EXPECT_EQ(count_op(g, "bn_relu"), 1);  // norm2 is folded into conv1 first
  EXPECT_EQ(count_op(g, "batchnorm2d"), 0);
  EXPECT_EQ(count_op(g, "fold_batchnorm"), 1);
  for (int id : g.order())
    if (g.node(id).op == "bn_relu") {
      EXPECT_EQ(g.node(id).attrs.i("training", 1), 0);
      EXPECT_EQ(g.node(id).outputs.size(), 1u);
    }
}

TEST(FuseBnRelu, ASecondConsumerOfTheBatchnormOutputBlocksIt) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  const int n = b.batchnorm(x, "bn");
  g.mark_output(b.add(b.conv(b.relu(n, "relu"), 4, 3, 1, 1, {}, "conv"), n, "peek"));
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 0);
  EXPECT_EQ(count_op(g, "batchnorm2d"), 1);
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_EQ(r.rejections[0].node, "bn");
  EXPECT_NE(r.rejections[0].reason.find("batchnorm output 'bn.y' has 2 consumers"), std::string::npos)
      << r.rejections[0].reason;
}

TEST(FuseBnRelu, ASecondConsumerOfTheReluOutputBlocksIt) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  const int y = b.relu(b.batchnorm(x, "bn"), "relu");
  g.mark_output(b.add(b.conv(y, 4, 3, 1, 1, {}, "conv"), y, "peek"));
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 0);
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_EQ(r.rejections[0].pattern, kPlain);
  EXPECT_NE(r.rejections[0].reason.find("relu output"), std::string::npos) << r.rejections[0].reason;
  EXPECT_NE(r.rejections[0].reason.find("2 consumers"), std::string::npos) << r.rejections[0].reason;
}

TEST(FuseBnRelu, AReadStatisticBlocksIt) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  g.mark_output(b.relu(b.batchnorm(x, "bn"), "relu"));
  g.mark_output(g.find_value("bn.saved_mean"));
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 0);
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_NE(r.rejections[0].reason.find("statistics output 'bn.saved_mean' is read elsewhere"), std::string::npos)
      << r.rejections[0].reason;
}

TEST(FuseBnRelu, RunningStatisticsInATrainingGraphBlockIt) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  const int n = b.batchnorm(x, "bn");
  ir::Node& bn = g.node(g.value(n).producer);
  bn.attrs.set("training", int64_t{0});
  bn.outputs.resize(1);
  g.mark_output(b.relu(n, "relu"));
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "bn_relu"), 0);
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_NE(r.rejections[0].reason.find("running statistics in a training graph"), std::string::npos)
      << r.rejections[0].reason;
}

TEST(FuseBnRelu, AConvolutionsOwnBatchnormStaysCbrsWhenThatPassIsOff) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  g.mark_output(b.relu(b.batchnorm(b.conv(x, 4, 3, 1, 1, {}, "conv"), "bn"), "relu"));
  passes::CompileOptions opt;
  passes::PassContext ctx(opt);
  passes::fuse_bn_relu(g, ctx);  // without fuse_conv_bn_relu before it
  EXPECT_EQ(count_op(g, "bn_relu"), 0);
  ASSERT_EQ(ctx.rejections.size(), 1u);
  EXPECT_NE(ctx.rejections[0].reason.find("fuse_conv_bn_relu"), std::string::npos) << ctx.rejections[0].reason;
}

TEST(FuseBnRelu, AConvolutionOutputReadTwiceLeavesItsBatchnormToThisPass) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  const int c = b.conv(x, 4, 3, 1, 1, {}, "conv");
  g.mark_output(b.add(b.relu(b.batchnorm(c, "bn"), "relu"), c, "peek"));
  const PassResult r = run_fusions(g);  // cbr refuses: the conv output has 2 consumers
  EXPECT_EQ(count_op(g, "cbr"), 0);
  EXPECT_EQ(count_op(g, "bn_relu"), 1);
  ASSERT_EQ(r.fusions.size(), 1u);
  EXPECT_EQ(r.fusions[0].pattern, kPlain);
}

TEST(FuseBnRelu, ABatchnormNoReluReadsIsNoCandidate) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("x", {2, 6, 6, 4});
  g.mark_output(b.add(b.batchnorm(x, "bn"), x, "add"));  // a shortcut's batchnorm
  const PassResult r = run_fusions(g);
  EXPECT_EQ(count_op(g, "batchnorm2d"), 1);
  EXPECT_TRUE(r.fusions.empty());
  EXPECT_TRUE(r.rejections.empty());
}

TEST(FuseBnRelu, TheBackwardIsOneBatchnormReluBackward) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  const auto fused = runtime::compile_graph(preact_network(DType::f32), opt);
  opt.disabled_passes = {"fuse_bn_relu"};
  const auto plain = runtime::compile_graph(preact_network(DType::f32), opt);
  // Two cbr and two bn_relu backwards, against the two cbr ones and two batchnorm ones (with
  // their relu backwards, which fuse_elementwise may take).
  EXPECT_EQ(count_op(fused.graph, "batchnorm_relu_backward"), 4);
  EXPECT_EQ(count_op(fused.graph, "batchnorm2d_backward"), 0);
  EXPECT_EQ(count_op(fused.graph, "relu_backward"), 0);
  EXPECT_EQ(count_op(plain.graph, "batchnorm_relu_backward"), 2);
  EXPECT_EQ(count_op(plain.graph, "batchnorm2d_backward"), 2);
  EXPECT_LT(fused.graph.order().size(), plain.graph.order().size());
}

TEST(FuseBnRelu, APackedMaskFeedsTheBackwardAndGivesTheSameGradients) {
  passes::CompileOptions masked;
  masked.mode = passes::Mode::Train;
  masked.optimizer = false;
  masked.relu_bit_mask = 1;  // the cuda default, on the reference backend
  passes::CompileOptions plain = masked;
  plain.disabled_passes = {"fuse_bn_relu"};
  const ir::Graph model = preact_network(DType::f64);
  auto fused = runtime::Executable::compile(model, masked);
  auto unfused = runtime::Executable::compile(model, plain);
  int masks = 0, masked_backwards = 0;
  for (int id : fused->graph().order()) {
    const ir::Node& n = fused->graph().node(id);
    if (n.op == "bn_relu") masks += n.attrs.i("relu_mask", 0) == 1 && n.outputs.size() == 6;
    // bn_relu's backward ("<bn>.bn_relu.bn_relu_backward"; cbr's are "<conv>.cbr.…").
    if (n.op == "batchnorm_relu_backward" && n.name.find(".bn_relu.bn_relu_backward") != std::string::npos)
      masked_backwards += fused->graph().value(n.inputs[0]).dtype == DType::i32;
  }
  EXPECT_EQ(masks, 2);
  EXPECT_EQ(masked_backwards, 2);
  for (auto* exe : {fused.get(), unfused.get()}) {
    exe->init_parameters(5);
    Rng r(1);
    TensorView img = exe->find("images"), lab = exe->find("labels");
    for (int64_t i = 0; i < img.numel(); ++i) img.as<double>()[i] = r.uniform(-1, 1);
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
    exe->run();
  }
  for (const auto& [param, grad] : unfused->param_grads())
    for (const auto& [p, fused_grad] : fused->param_grads())
      if (fused->graph().value(p).name == unfused->graph().value(param).name) {
        const TensorView a = fused->view(fused_grad), b = unfused->view(grad);
        test_support::expect_close(std::vector<double>(a.as<double>(), a.as<double>() + a.numel()),
                                   std::vector<double>(b.as<double>(), b.as<double>() + b.numel()), DType::f64,
                                   "gradient of " + unfused->graph().value(param).name);
      }
}

// Whole steps, fused against the pass disabled, on one backend in one dtype.
class FusedStepVsUnfused : public ::testing::TestWithParam<std::pair<std::string, DType>> {};

template <class T>
std::vector<double> doubles(const TensorView& v) {
  return std::vector<double>(v.as<T>(), v.as<T>() + v.numel());
}
std::vector<double> doubles_of(const TensorView& v) {
  return v.dtype == DType::f64 ? doubles<double>(v) : doubles<float>(v);
}

void fill_batch(runtime::Executable& exe, DType dtype) {
  Rng r(1);
  TensorView img = exe.find("images"), lab = exe.find("labels");
  for (int64_t i = 0; i < img.numel(); ++i) {
    const double v = r.uniform(-1, 1);
    if (dtype == DType::f64) img.as<double>()[i] = v;
    else img.as<float>()[i] = static_cast<float>(v);
  }
  for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
  if (!exe.has("lr")) return;  // no optimizer: the gradients are the outputs
  TensorView lr = exe.find("lr");
  if (lr.dtype == DType::f64) lr.as<double>()[0] = 0.1;
  else lr.as<float>()[0] = 0.1f;
}

TEST_P(FusedStepVsUnfused, GradientsAndTwoStepsAgree) {
  const auto [backend, dtype] = GetParam();
  if (!KernelRegistry::has(backend, "bn_relu")) GTEST_SKIP() << "this build has no " << backend << " backend";
  const ir::Graph model = preact_network(dtype);
  for (bool optimizer : {false, true}) {
    SCOPED_TRACE(optimizer ? "two SGD steps" : "gradients of one step");
    passes::CompileOptions fused_opt;
    fused_opt.mode = passes::Mode::Train;
    fused_opt.backend = backend;
    fused_opt.optimizer = optimizer;
    passes::CompileOptions plain_opt = fused_opt;
    plain_opt.disabled_passes = {"fuse_bn_relu"};
    auto fused = runtime::Executable::compile(model, fused_opt);
    auto plain = runtime::Executable::compile(model, plain_opt);
    ASSERT_EQ(count_op(fused->graph(), "bn_relu"), 2);
    ASSERT_EQ(count_op(plain->graph(), "bn_relu"), 0);
    for (auto* exe : {fused.get(), plain.get()}) {
      exe->init_parameters(5);
      fill_batch(*exe, dtype);
    }
    for (int step = 0; step < (optimizer ? 2 : 1); ++step) {
      fused->run();
      plain->run();
      test_support::expect_close(doubles_of(fused->view(fused->loss())), doubles_of(plain->view(plain->loss())), dtype,
                                 "loss of step " + std::to_string(step));
    }
    if (!optimizer) {
      ASSERT_EQ(fused->param_grads().size(), plain->param_grads().size());
      for (const auto& [param, grad] : plain->param_grads()) {
        const std::string& name = plain->graph().value(param).name;
        int fused_grad = -1;
        for (const auto& [p, gr] : fused->param_grads())
          if (fused->graph().value(p).name == name) fused_grad = gr;
        ASSERT_GE(fused_grad, 0) << name;
        test_support::expect_close(doubles_of(fused->view(fused_grad)), doubles_of(plain->view(grad)), dtype,
                                   "gradient of " + name);
      }
    }
    // Parameters (after the steps), momenta and running statistics.
    int compared = 0;
    for (int v = 0; v < plain->graph().num_values(); ++v) {
      const ir::Value& val = plain->graph().value(v);
      if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
      if (val.dtype != dtype) continue;  // the loss-scale counters of mixed precision
      test_support::expect_close(doubles_of(fused->find(val.name)), doubles_of(plain->view(v)), dtype, val.name);
      ++compared;
    }
    EXPECT_GT(compared, 20);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedStepVsUnfused,
                         ::testing::Values(std::make_pair(std::string("cpu_ref"), DType::f64),
                                           std::make_pair(std::string("cpu_ref"), DType::f32),
                                           std::make_pair(std::string("cpu"), DType::f32)),
                         [](const auto& info) {
                           return info.param.first + "_" + std::string(dtype_name(info.param.second));
                         });

TEST(FuseBnRelu, FusesOnEveryBackendByDefaultAndRefusesWhenTurnedOff) {
  for (const char* backend : {"cpu_ref", "cuda"}) {
    SCOPED_TRACE(backend);
    for (int setting : {-1, 0}) {
      ir::Graph g = dense_layer();
      passes::CompileOptions opt;
      opt.mode = passes::Mode::Train;
      opt.backend = backend;
      opt.bn_relu_fusion = setting;
      passes::PassContext ctx(opt);
      passes::fuse_conv_bn_relu(g, ctx);
      passes::fuse_bn_relu(g, ctx);
      EXPECT_EQ(count_op(g, "bn_relu"), setting < 0 ? 1 : 0);
      int refused = 0;
      for (const auto& j : ctx.rejections)
        if (j.pass == "fuse_bn_relu") {
          ++refused;
          EXPECT_NE(j.reason.find("bn_relu_fusion = 0"), std::string::npos) << j.reason;
        }
      EXPECT_EQ(refused, setting < 0 ? 0 : 1);
    }
  }
}
