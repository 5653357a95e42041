// Inference fusions: fold_bn (exact batchnorm folding, hoisted out of the step) and
// fuse_conv_epilogue (bias / residual add / relu in the convolution). Structural, negative
// and numerical checks, the numerical ones against the same model compiled without them.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/graph_queries.h"

#include "backends/kernel.h"
#include "core/error.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/graph_runner.h"
#include "support/tolerance.h"

using namespace trident;
using test_support::count_op;

namespace {

passes::CompileOptions infer_options(std::vector<std::string> disabled = {}) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  o.disabled_passes = std::move(disabled);
  return o;
}

// Random weights and non-trivial running statistics, the same in every executable.
void randomize_weights(runtime::Executable& exe, uint64_t seed) {
  for (int v = 0; v < exe.graph().num_values(); ++v) {
    const ir::Value& val = exe.graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    if (!exe.has(val.name)) continue;
    Rng rng(seed ^ hash_name(val.name));
    TensorView t = exe.view(v);
    const bool var = val.name.find("running_var") != std::string::npos;
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = static_cast<float>(var ? rng.uniform(0.2, 3.0) : rng.uniform(-1, 1));
  }
  exe.prepare();
}

std::vector<double> logits_of(runtime::Executable& exe) {
  Rng rng(99);
  TensorView img = exe.find("images");
  for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  exe.run();
  TensorView z = exe.view(exe.logits());
  return std::vector<double>(z.as<float>(), z.as<float>() + z.numel());
}

ir::Graph folding_model() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {2, 10, 10, 4});
  x = b.cbr(x, 8, 3, 1, 1, "plain");  // no conv bias
  b.push("biased");
  x = b.relu(b.batchnorm(b.conv(x, 8, 3, 2, 1, {.bias = true}, "conv"), "bn"), "relu");
  b.pop();
  b.push("grouped");
  int y = b.batchnorm(b.conv(x, 8, 3, 1, 1, {.groups = 4}, "conv"), "bn");
  x = b.relu(b.add(y, x, "add"), "relu");
  b.pop();
  g.mark_output(b.linear(b.flatten(b.global_avgpool(x)), 5, true, "fc"));
  return g;
}

}  // namespace

TEST(FoldBn, RemovesEveryBatchnormAndHoistsTheFolding) {
  auto c = runtime::compile_graph(frontend::build_model("resnet18", {1}), infer_options());
  EXPECT_EQ(count_op(c.graph, "batchnorm2d"), 0);
  EXPECT_EQ(count_op(c.graph, "fold_batchnorm"), 20);
  for (int id : c.graph.order())
    EXPECT_EQ(c.plan.hoisted[id] != 0, c.graph.node(id).op == "fold_batchnorm") << c.graph.node(id).name;
}

TEST(FoldBn, RefusesATrainingGraph) {
  ir::Graph g = frontend::build_model("fmnist_cnn", {2});
  passes::CompileOptions o;
  passes::PassContext ctx(o);
  try {
    passes::fold_bn(g, ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training mode"), std::string::npos) << e.what();
  }
}

TEST(FoldBn, FoldedInferenceEqualsUnfoldedWithinOneInOneHundredThousand) {
  ir::Graph model = folding_model();
  auto folded = runtime::Executable::compile(model, infer_options());
  auto plain = runtime::Executable::compile(model, infer_options({"fold_bn", "fuse_conv_epilogue"}));
  EXPECT_EQ(count_op(folded->graph(), "batchnorm2d"), 0);
  EXPECT_EQ(count_op(plain->graph(), "batchnorm2d"), 3);
  randomize_weights(*folded, 4);
  randomize_weights(*plain, 4);
  const auto a = logits_of(*folded), b = logits_of(*plain);
  ASSERT_EQ(a.size(), b.size());
  double max_ref = 0;
  for (double v : b) max_ref = std::max(max_ref, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(std::abs(a[i] - b[i]), 1e-5 * max_ref) << i;
}

TEST(FoldBn, AConvOutputReadTwiceIsNotFolded) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {1, 6, 6, 2});
  int c = b.conv(x, 3, 3, 1, 1, {}, "conv");
  g.mark_output(b.add(b.batchnorm(c, "bn"), c, "peek"));
  auto out = runtime::compile_graph(g, infer_options());
  EXPECT_EQ(count_op(out.graph, "batchnorm2d"), 1);
  ASSERT_FALSE(out.rejections.empty());
  EXPECT_NE(out.rejections[0].reason.find("2 consumers"), std::string::npos);
}

TEST(ConvEpilogue, ResidualNetworkBecomesConvolutionsWithEpilogues) {
  auto c = runtime::compile_graph(frontend::build_model("resnet_cifar", {1}), infer_options());
  EXPECT_EQ(count_op(c.graph, "add"), 0);
  EXPECT_EQ(count_op(c.graph, "relu"), 0);
  EXPECT_EQ(count_op(c.graph, "conv2d_epilogue"), 19);  // stem + 2 per block
  EXPECT_EQ(count_op(c.graph, "conv2d"), 2);             // projection shortcuts feed a residual
}

// MobileNet's Conv -> Clip(0, 6) (ReLU6) joins the epilogue as Conv -> Relu does, after a
// residual add too, on the cpu and cuda pipelines; a clip that is not a bounded ReLU stays.
TEST(ConvEpilogue, Relu6JoinsTheEpilogue) {
  auto build = [](double lo, bool residual) {
    ir::Graph g;
    frontend::Builder b(g);
    int x = g.add_input("images", {2, 8, 8, 4});
    int y = b.conv(x, 4, 3, 1, 1, {.bias = true}, "conv");
    if (residual) y = g.add_node1("add", {y, x}, {}, "add");
    y = g.add_node1("clip", {y}, {{"min", lo}, {"max", 6.0}}, "relu6");
    g.mark_output(b.linear(b.flatten(b.global_avgpool(y, "pool"), "flat"), 3, true, "fc"));
    return g;
  };
  for (bool residual : {false, true}) {
    auto c = runtime::compile_graph(build(0.0, residual), infer_options());
    EXPECT_EQ(count_op(c.graph, "clip"), 0) << residual;
    ASSERT_EQ(count_op(c.graph, "conv2d_epilogue"), 1) << residual;
    for (int id : c.graph.order()) {
      if (c.graph.node(id).op != "conv2d_epilogue") continue;
      EXPECT_EQ(c.graph.node(id).attrs.f("relu_max"), 6.0);
    }
  }
  EXPECT_EQ(count_op(runtime::compile_graph(build(-1.0, false), infer_options()).graph, "clip"), 1);
  passes::CompileOptions cuda = infer_options();
  cuda.backend = "cuda";
  EXPECT_EQ(count_op(runtime::compile_graph(build(0.0, true), cuda).graph, "clip"), 0);
}

// EfficientNet's Conv -> SiLU and MobileNet v3's Conv -> Hardswish join the epilogue where the
// backend's traits list the activation (cpu: oneDNN's post-ops; not hardsigmoid, which oneDNN
// lacks); on cuda, whose epilogue takes none, the activation stays its own node.
TEST(ConvEpilogue, AnActivationJoinsTheEpilogueWhereTheBackendTakesIt) {
  auto build = [](const std::string& fn, bool residual) {
    ir::Graph g;
    frontend::Builder b(g);
    int x = g.add_input("images", {2, 8, 8, 4});
    int y = b.conv(x, 4, 3, 1, 1, {.bias = true}, "conv");
    if (residual) y = g.add_node1("add", {y, x}, {}, "add");
    y = b.activation(y, fn, "act");
    g.mark_output(b.linear(b.flatten(b.global_avgpool(y, "pool"), "flat"), 3, true, "fc"));
    return g;
  };
  passes::CompileOptions cpu = infer_options(), cuda = infer_options();
  cpu.backend = "cpu";
  cuda.backend = "cuda";
  for (bool residual : {false, true}) {
    for (const char* fn : {"silu", "hardswish"}) {
      const auto c = runtime::compile_graph(build(fn, residual), cpu);
      EXPECT_EQ(count_op(c.graph, "activation"), 0) << fn << residual;
      ASSERT_EQ(count_op(c.graph, "conv2d_epilogue"), 1) << fn << residual;
      for (int id : c.graph.order())
        if (c.graph.node(id).op == "conv2d_epilogue") EXPECT_EQ(c.graph.node(id).attrs.s("activation"), fn);
      const std::string pattern = std::string(residual ? "conv-add-" : "conv-") + fn;
      EXPECT_TRUE(std::any_of(c.fusions.begin(), c.fusions.end(),
                              [&](const passes::FusionRecord& f) { return f.pattern == pattern; }))
          << pattern;
    }
    EXPECT_EQ(count_op(runtime::compile_graph(build("hardsigmoid", residual), cpu).graph, "activation"), 1);
    EXPECT_EQ(count_op(runtime::compile_graph(build("silu", residual), cuda).graph, "activation"), 1);
  }
}

TEST(ConvEpilogue, MatchesItsDecompositionOnTheReferenceBackend) {
  for (int residual = 0; residual < 2; ++residual)
    for (int relu = 0; relu < 2; ++relu) {
      ir::Graph g;
      std::vector<int> in{g.add_input("x", {2, 7, 7, 3}), g.add_parameter("w", {4, 3, 3, 3}, {}),
                          g.add_parameter("b", {4}, {})};
      if (residual) in.push_back(g.add_input("r", {2, 4, 4, 4}));
      ir::Attrs a{{"stride", Shape{2, 2}}, {"padding", Shape{1, 1}}, {"has_bias", int64_t{1}},
                  {"residual", int64_t{residual}}, {"relu", int64_t{relu}}};
      const int y = g.add_node1("conv2d_epilogue", in, a, "epi");
      ir::Graph d = g;
      d.set_order({});
      const int yd = ir::OpRegistry::get("conv2d_epilogue").decompose(d, g.node(g.value(y).producer)).at(0);
      test_support::GraphRunner rf(g, "cpu_ref"), rd(d, "cpu_ref");
      rf.randomize(3);
      rd.randomize(3);
      rf.run();
      rd.run();
      test_support::expect_close(rf.values(y), rd.values(yd), DType::f32, "conv2d_epilogue");
    }
}

TEST(InferencePipeline, FoldingFollowsWeightUpdates) {
  // The trainer copies new weights into the inference executable before every evaluation;
  // the hoisted folding must see them.
  ir::Graph model = folding_model();
  auto exe = runtime::Executable::compile(model, infer_options());
  randomize_weights(*exe, 1);
  const auto first = logits_of(*exe);
  randomize_weights(*exe, 2);
  EXPECT_NE(first, logits_of(*exe));
}

TEST(ReuseResidualBuffer, LastReaderOfTheResidualWritesIntoIt) {
  auto c = runtime::compile_graph(frontend::build_model("resnet_cifar", {1}), infer_options());
  int in_place = 0;
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op != "conv2d_epilogue" || !n.attrs.i("inplace_residual", 0)) continue;
    ++in_place;
    EXPECT_EQ(c.plan.placement[n.outputs[0]].offset, c.plan.placement[n.inputs.back()].offset) << n.name;
    EXPECT_EQ(c.plan.root[n.outputs[0]], c.plan.root[n.inputs.back()]) << n.name;
  }
  EXPECT_EQ(in_place, 9);  // every residual block's tail
  // Switched off, nothing is in place and the outputs agree.
  auto off = runtime::compile_graph(frontend::build_model("resnet_cifar", {1}),
                                    infer_options({"reuse_residual_buffer"}));
  for (int id : off.graph.order()) EXPECT_EQ(off.graph.node(id).attrs.i("inplace_residual", 0), 0);
}

TEST(ReuseResidualBuffer, InPlaceEpiloguesGiveTheSameLogits) {
  for (const char* backend : {"cpu_ref", "cpu"}) {
    if (!KernelRegistry::has(backend, "conv2d_epilogue")) continue;
    ir::Graph model = frontend::build_model("resnet_cifar", {2});
    auto o = infer_options();
    o.backend = backend;
    auto in_place = runtime::Executable::compile(model, o);
    o.disabled_passes = {"reuse_residual_buffer"};
    auto copying = runtime::Executable::compile(model, o);
    randomize_weights(*in_place, 8);
    randomize_weights(*copying, 8);
    EXPECT_EQ(logits_of(*in_place), logits_of(*copying)) << backend;
  }
}
