// fuse_conv_bn_relu, in three layers: structural (what the pass replaced), negative (what
// must block it), numerical (fused kernels against their decomposition, and a whole fused
// training step against the unfused one: loss, every gradient, the running statistics).
#include <gtest/gtest.h>

#include "support/graph_queries.h"

#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/graph_runner.h"
#include "support/tolerance.h"

using namespace trident;
using test_support::count_op;

namespace {


void run_fusion(ir::Graph& g, std::vector<passes::Rejection>* rejections = nullptr,
                std::vector<passes::FusionRecord>* fusions = nullptr) {
  passes::CompileOptions opt;
  passes::PassContext ctx(opt);
  passes::fuse_conv_bn_relu(g, ctx);
  ir::verify(g);
  if (rejections) *rejections = ctx.rejections;
  if (fusions) *fusions = ctx.fusions;
}

// The same model compiled for training on `backend` twice: with every pass, and with
// fuse_conv_bn_relu disabled.
std::pair<std::unique_ptr<runtime::Executable>, std::unique_ptr<runtime::Executable>> fused_and_plain(
    const ir::Graph& model, const std::string& backend = "cpu_ref") {
  passes::CompileOptions fused_opt;
  fused_opt.mode = passes::Mode::Train;
  fused_opt.backend = backend;
  passes::CompileOptions plain_opt = fused_opt;
  plain_opt.disabled_passes = {"fuse_conv_bn_relu"};
  return {runtime::Executable::compile(model, fused_opt), runtime::Executable::compile(model, plain_opt)};
}

}  // namespace

TEST(FuseConvBnRelu, DefaultModelBecomesThreeCbrNodes) {
  ir::Graph g = frontend::build_model("fmnist_cnn", {4});
  const size_t before = g.order().size();
  std::vector<passes::FusionRecord> fusions;
  run_fusion(g, nullptr, &fusions);
  EXPECT_EQ(count_op(g, "cbr"), 3);
  EXPECT_EQ(count_op(g, "conv2d") + count_op(g, "batchnorm2d") + count_op(g, "relu"), 0);
  EXPECT_EQ(g.order().size(), before - 6);
  ASSERT_EQ(fusions.size(), 3u);
  EXPECT_EQ(fusions[0].pattern, "conv-bn-relu");
  EXPECT_EQ(fusions[0].nodes, (std::vector<std::string>{"block1.conv", "block1.bn", "block1.relu"}));
}

TEST(FuseConvBnRelu, ResidualTailsBecomeCbarAndShortcutsAreRefusedWithAReason) {
  ir::Graph g = frontend::build_model("resnet_cifar", {2});
  std::vector<passes::Rejection> rejections;
  run_fusion(g, &rejections);
  EXPECT_EQ(count_op(g, "cbr"), 1 + 9);   // stem + first conv of every block
  EXPECT_EQ(count_op(g, "cbar"), 9);      // second conv + add + relu of every block
  EXPECT_EQ(count_op(g, "add"), 0);
  EXPECT_EQ(count_op(g, "batchnorm2d"), 2);  // the two projection shortcuts
  ASSERT_EQ(rejections.size(), 2u);
  EXPECT_NE(rejections[0].reason.find("not a relu, a clip(0, m) or an add"), std::string::npos) << rejections[0].reason;
}

TEST(FuseConvBnRelu, ASecondConsumerOfTheConvOutputBlocksIt) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {2, 6, 6, 3});
  int c = b.conv(x, 4, 3, 1, 1, {}, "conv");
  int y = b.relu(b.batchnorm(c, "bn"), "relu");
  g.mark_output(b.add(y, c, "peek"));  // the conv output is read twice
  std::vector<passes::Rejection> rejections;
  run_fusion(g, &rejections);
  EXPECT_EQ(count_op(g, "cbr"), 0);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_NE(rejections[0].reason.find("2 consumers"), std::string::npos) << rejections[0].reason;
}

TEST(FuseConvBnRelu, ASecondConsumerOfTheBatchnormOutputBlocksIt) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {2, 6, 6, 3});
  int n = b.batchnorm(b.conv(x, 4, 3, 1, 1, {}, "conv"), "bn");
  g.mark_output(b.add(b.relu(n, "relu"), n, "peek"));
  run_fusion(g);
  EXPECT_EQ(count_op(g, "cbr"), 0);
  EXPECT_EQ(count_op(g, "cbar"), 0);
}

TEST(FuseConvBnRelu, InferenceModeBatchnormIsNotATrainingCbr) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {2, 6, 6, 3});
  int c = b.conv(x, 4, 3, 1, 1, {}, "conv");
  int n = b.batchnorm(c, "bn");
  g.node(g.value(n).producer).attrs.set("training", int64_t{0});
  g.node(g.value(n).producer).outputs.resize(1);
  g.mark_output(b.relu(n, "relu"));
  std::vector<passes::Rejection> rejections;
  run_fusion(g, &rejections);
  EXPECT_EQ(count_op(g, "cbr"), 0);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_NE(rejections[0].reason.find("inference mode"), std::string::npos);
}

// Fused kernel vs decomposition, op by op, on the reference backend, in f64 and f32.
class FusedOpVsDecomposition : public ::testing::TestWithParam<std::tuple<std::string, DType, bool>> {};

TEST_P(FusedOpVsDecomposition, EveryOutputMatches) {
  const auto [op, dtype, bias] = GetParam();
  for (const std::string& which : {op, std::string("batchnorm_relu_backward")}) {
    ir::Graph g;
    const Shape x_shape{3, 7, 6, 4}, y_shape{3, 4, 3, 5};
    std::vector<int> in;
    ir::Attrs a;
    if (which == op) {
      in = {g.add_input("x", x_shape, dtype), g.add_parameter("w", {5, 3, 3, 4}, {}, dtype)};
      for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
        in.push_back(g.add_parameter(n, {5}, {}, dtype));
      if (op == "cbar") in.push_back(g.add_input("residual", y_shape, dtype));
      if (bias) in.push_back(g.add_parameter("b", {5}, {}, dtype));
      a = {{"stride", Shape{2, 2}}, {"padding", Shape{1, 1}}, {"eps", 1e-5}, {"momentum", 0.1}};
    } else {
      for (const char* n : {"y", "dy", "conv_out"}) in.push_back(g.add_input(n, y_shape, dtype));
      for (const char* n : {"gamma", "saved_mean", "saved_invstd"}) in.push_back(g.add_parameter(n, {5}, {}, dtype));
      a = {{"eps", 1e-5}, {"residual", int64_t{op == "cbar"}}};
    }
    const std::vector<int> fused_out = g.add_node(which, in, a, "fused");
    ir::Graph d = g;  // same values; the decomposition replaces the fused node
    d.set_order({});
    const ir::Node fused_node = g.node(g.value(fused_out[0]).producer);
    const std::vector<int> dec_out = ir::OpRegistry::get(which).decompose(d, fused_node);
    ASSERT_EQ(dec_out.size(), fused_out.size());

    test_support::GraphRunner rf(g, "cpu_ref"), rd(d, "cpu_ref");
    rf.randomize(11);
    rd.randomize(11);
    rf.run();
    rd.run();
    for (size_t i = 0; i < fused_out.size(); ++i)
      test_support::expect_close(rf.values(fused_out[i]), rd.values(dec_out[i]), dtype,
                            which + " output " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, FusedOpVsDecomposition,
                         ::testing::Combine(::testing::Values("cbr", "cbar"),
                                            ::testing::Values(DType::f64, DType::f32),
                                            ::testing::Bool()));

// A whole training step: fused graph vs the same model with the fusion pass disabled.
TEST(FuseConvBnRelu, FusedTrainingStepEqualsUnfusedStep) {
  ir::Graph model;
  {
    frontend::Builder b(model, DType::f64);
    int x = b.input("images", {4, 8, 8, 3}, DType::f64);
    int a = b.cbr(x, 6, 3, 1, 1, "stem");
    b.push("block");
    int c = b.batchnorm(b.conv(a, 6, 3, 1, 1, {.bias = true}, "conv"), "bn");
    c = b.relu(b.add(c, a, "add"), "relu");
    b.pop();
    model.mark_output(b.linear(b.flatten(b.global_avgpool(c)), 5, true, "fc"));
  }
  auto [fused, plain] = fused_and_plain(model);
  EXPECT_EQ(count_op(fused->graph(), "cbr"), 1);
  EXPECT_EQ(count_op(fused->graph(), "cbar"), 1);
  EXPECT_EQ(count_op(plain->graph(), "cbr") + count_op(plain->graph(), "cbar"), 0);
  fused->init_parameters(5);
  plain->init_parameters(5);
  Rng rng(1);
  for (auto* exe : {fused.get(), plain.get()}) {
    Rng r(1);
    TensorView img = exe->find("images"), lab = exe->find("labels");
    for (int64_t i = 0; i < img.numel(); ++i) img.as<double>()[i] = r.uniform(-1, 1);
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
    exe->find("lr").as<double>()[0] = 0.1;
  }
  for (int step = 0; step < 2; ++step) {
    fused->run();
    plain->run();
    EXPECT_NEAR(fused->view(fused->loss()).as<double>()[0], plain->view(plain->loss()).as<double>()[0], 1e-12);
  }
  // After two optimizer steps every parameter, momentum and running statistic agrees.
  for (int v = 0; v < plain->graph().num_values(); ++v) {
    const ir::Value& val = plain->graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    TensorView p = plain->view(v), f = fused->find(val.name);
    std::vector<double> pv(p.as<double>(), p.as<double>() + p.numel()), fv(f.as<double>(), f.as<double>() + f.numel());
    test_support::expect_close(fv, pv, DType::f64, val.name);
  }
}

// ReLU6 (ONNX Clip(0, 6), as MobileNet v2 exports it) fuses like a relu: a cbr with relu_max;
// a clip after the residual add is refused with the reason, and so is a clip with a lower bound.
TEST(FuseConvBnRelu, AClipFromZeroIsACbrWithRelu6) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("x", {2, 6, 6, 8});
  int y = b.batchnorm(b.conv(x, 8, 3, 1, 1, {}, "conv1"), "bn1");
  y = g.add_node1("clip", {y}, {{"min", 0.0}, {"max", 6.0}}, "relu6");
  int z = b.batchnorm(b.conv(y, 8, 3, 1, 1, {}, "conv2"), "bn2");
  z = g.add_node1("clip", {b.add(z, y, "add")}, {{"min", 0.0}, {"max", 6.0}}, "add_relu6");
  int w = b.batchnorm(b.conv(z, 8, 1, 1, 0, {}, "conv3"), "bn3");
  g.mark_output(g.add_node1("clip", {w}, {{"min", -1.0}, {"max", 6.0}}, "hardtanh"));
  std::vector<passes::Rejection> rejections;
  std::vector<passes::FusionRecord> fusions;
  run_fusion(g, &rejections, &fusions);
  ASSERT_EQ(count_op(g, "cbr"), 1);
  for (int id : g.order()) {
    if (g.node(id).op != "cbr") continue;
    EXPECT_EQ(g.node(id).attrs.f("relu_max"), 6.0);
  }
  ASSERT_EQ(fusions.size(), 1u);
  EXPECT_EQ(fusions[0].pattern, "conv-bn-clip");
  EXPECT_EQ(fusions[0].nodes, (std::vector<std::string>{"conv1", "bn1", "relu6"}));
  ASSERT_EQ(rejections.size(), 2u);
  EXPECT_NE(rejections[0].reason.find("a clipped relu after the residual add is not fused"), std::string::npos)
      << rejections[0].reason;
  EXPECT_NE(rejections[1].reason.find("not a relu, a clip(0, m) or an add"), std::string::npos) << rejections[1].reason;
}

// A training step of conv → bn → clip(0, m) blocks, fused (cbr with relu_max, its backward
// masked by 0 < y < m) against the same model unfused, in f64 on cpu_ref and in f32 on the cpu
// backend: the loss, and after two SGD steps every parameter and running statistic. The bound is
// 0.5 so that both ends of the clip mask gradients.
class FusedClipStep : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedClipStep, EqualsTheUnfusedStep) {
  const std::string backend = GetParam();
  const DType d = backend == "cpu_ref" ? DType::f64 : DType::f32;
  ir::Graph model;
  {
    frontend::Builder b(model, d);
    int x = b.input("images", {4, 8, 8, 3}, d);
    int a = b.batchnorm(b.conv(x, 6, 3, 1, 1, {}, "stem"), "stem_bn");
    a = model.add_node1("clip", {a}, {{"min", 0.0}, {"max", 0.5}}, "stem_relu6");
    int c = b.batchnorm(b.conv(a, 6, 3, 2, 1, {.bias = true}, "conv"), "bn");
    c = model.add_node1("clip", {c}, {{"min", 0.0}, {"max", 0.5}}, "relu6");
    model.mark_output(b.linear(b.flatten(b.global_avgpool(c)), 5, true, "fc"));
  }
  auto [fused, plain] = fused_and_plain(model, backend);
  EXPECT_EQ(count_op(fused->graph(), "cbr"), 2);
  EXPECT_EQ(count_op(plain->graph(), "cbr"), 0);
  fused->init_parameters(5);
  plain->init_parameters(5);
  auto values = [d](TensorView v) {
    std::vector<double> out(static_cast<size_t>(v.numel()));
    for (int64_t i = 0; i < v.numel(); ++i) out[i] = d == DType::f64 ? v.as<double>()[i] : v.as<float>()[i];
    return out;
  };
  for (auto* exe : {fused.get(), plain.get()}) {
    Rng r(1);
    TensorView img = exe->find("images"), lab = exe->find("labels");
    for (int64_t i = 0; i < img.numel(); ++i) {
      const double v = r.uniform(-1, 1);
      if (d == DType::f64) img.as<double>()[i] = v; else img.as<float>()[i] = static_cast<float>(v);
    }
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
    if (d == DType::f64) exe->find("lr").as<double>()[0] = 0.1; else exe->find("lr").as<float>()[0] = 0.1f;
  }
  for (int step = 0; step < 2; ++step) {
    fused->run();
    plain->run();
    test_support::expect_close(values(fused->view(fused->loss())), values(plain->view(plain->loss())), d, "loss");
  }
  for (int v = 0; v < plain->graph().num_values(); ++v) {
    const ir::Value& val = plain->graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    test_support::expect_close(values(fused->find(val.name)), values(plain->view(v)), d, val.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedClipStep, ::testing::Values("cpu_ref", "cpu"));
