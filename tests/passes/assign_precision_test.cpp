// Mixed precision (assign_precision) as a graph rewrite: which values become f16, which stay
// f32 (parameters, BN statistics, loss, gradients, optimizer state, the returned logits), that
// every weight gets exactly one cast, and that inference casts the folded weights once per
// weight update (hoisted). Plus dynamic loss scaling on cpu_ref: with a power-of-two scale a
// scaled step equals the unscaled step bit for bit, and an overflowed step changes nothing,
// halves the scale, and restarts the good-step count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/random.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

using runtime::CompiledGraph;

passes::CompileOptions options(passes::Mode mode, DType precision) {
  passes::CompileOptions o;
  o.mode = mode;
  o.precision = precision;
  return o;
}

TEST(AssignPrecision, TrainingGraphKeepsMasterWeightsStatsAndLossInF32) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  const CompiledGraph c = runtime::compile_graph(model, options(passes::Mode::Train, DType::f16));
  const ir::Graph& g = c.graph;
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    if (n.op == "cbr" || n.op == "cbar" || n.op == "conv2d") {
      EXPECT_EQ(g.value(n.inputs[0]).dtype, DType::f16) << n.name;
      EXPECT_EQ(g.value(n.inputs[1]).dtype, DType::f16) << n.name << " reads the weight's f16 copy";
      EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::f16) << n.name;
    }
    if (n.op == "cbr" || n.op == "cbar") {
      for (int k = 2; k < 6; ++k) EXPECT_EQ(g.value(n.outputs[k]).dtype, DType::f32) << n.name << " statistic " << k;
    }
  }
  EXPECT_EQ(g.value(c.loss).dtype, DType::f32);
  EXPECT_EQ(g.value(c.logits).dtype, DType::f32) << "callers read f32 logits";
  for (auto [p, grad] : c.param_grads) {
    EXPECT_EQ(g.value(p).dtype, DType::f32) << g.value(p).name;
    EXPECT_EQ(g.value(grad).dtype, DType::f32) << g.value(p).name << "'s gradient";
  }
  // One cast per weight and bias of a convolution or linear layer (the weights' in one
  // cast_group), one for the images, one for the logits; their backward casts bring the weight
  // gradients back to f32.
  int weights = 0;
  for (int v : g.values_with_role(ir::ValueRole::Parameter))
    weights += g.value(v).shape.size() >= 2 || g.value(v).name.find("fc.bias") != std::string::npos;
  int forward_casts = 0;
  for (int nid : g.order())
    if (g.node(nid).name.find(".backward") == std::string::npos) {
      if (g.node(nid).op == "cast") ++forward_casts;
      if (g.node(nid).op == "cast_group") forward_casts += static_cast<int>(g.node(nid).inputs.size());
    }
  EXPECT_EQ(forward_casts, weights + 2);
  EXPECT_GE(g.find_value("amp.loss_scale"), 0) << "f16 training scales the loss";
}

TEST(AssignPrecision, Bf16NeedsNoLossScaleAndF32IsUntouched) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {4});
  const CompiledGraph bf = runtime::compile_graph(model, options(passes::Mode::Train, DType::bf16));
  EXPECT_LT(bf.graph.find_value("amp.loss_scale"), 0);
  EXPECT_GT(test_support::count_op(bf.graph, "cast"), 0);
  const CompiledGraph f32 = runtime::compile_graph(model, options(passes::Mode::Train, DType::f32));
  EXPECT_EQ(test_support::count_op(f32.graph, "cast"), 0);
}

TEST(AssignPrecision, InferenceCastsFoldedWeightsOncePerWeightUpdate) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {2});
  const CompiledGraph c = runtime::compile_graph(model, options(passes::Mode::Infer, DType::f16));
  const ir::Graph& g = c.graph;
  int epilogues = 0;
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    if (n.op == "cast" && g.value(n.inputs[0]).role != ir::ValueRole::Input && n.name != "logits.f32") {
      EXPECT_TRUE(c.plan.hoisted[nid]) << n.name << " should run once per weight update";
    }
    if (n.op != "conv2d_epilogue") continue;
    ++epilogues;
    EXPECT_EQ(g.value(n.inputs[1]).dtype, DType::f16) << n.name;
    EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::f16) << n.name;
  }
  EXPECT_GT(epilogues, 0);
  EXPECT_EQ(g.value(c.logits).dtype, DType::f32);
}

// ---- dynamic loss scaling on the reference backend ----

std::unique_ptr<runtime::Executable> scaled(int loss_scaling, double scale = 1024) {
  passes::CompileOptions o;
  o.backend = "cpu_ref";
  o.loss_scaling = loss_scaling;
  o.initial_loss_scale = scale;
  o.loss_scale_growth_interval = 2;
  auto exe = runtime::Executable::compile(frontend::build_model("fmnist_cnn", {8}), o);
  exe->init_parameters(3);
  Rng rng(4);
  TensorView x = exe->host_view(exe->value_id("images")), y = exe->host_view(exe->value_id("labels")),
             lr = exe->host_view(exe->value_id("lr"));
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (int64_t i = 0; i < y.numel(); ++i) y.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
  lr.as<float>()[0] = 0.1f;
  return exe;
}

std::vector<float> floats(const runtime::Executable& e, const std::string& name) {
  TensorView t = e.find(name);
  return {t.as<float>(), t.as<float>() + t.numel()};
}

TEST(LossScaling, PowerOfTwoScaleChangesNoBitOfTheStep) {
  auto plain = scaled(0), with = scaled(1);
  for (int step = 0; step < 3; ++step) {
    plain->run();
    with->run();
  }
  for (const char* name : {"block1.conv.weight", "block3.conv.weight", "block2.bn.weight", "fc.weight", "fc.bias",
                           "block1.bn.running_var", "fc.weight.momentum"}) {
    ASSERT_TRUE(plain->has(name)) << name;
    EXPECT_EQ(floats(*plain, name), floats(*with, name)) << name;
  }
  // Three good steps with growth every 2: 1024 → 2048 after step 2, good count back to 1.
  EXPECT_EQ(floats(*with, "amp.loss_scale")[0], 2048.f);
  EXPECT_EQ(floats(*with, "amp.good_steps")[0], 1.f);
}

TEST(LossScaling, OverflowSkipsTheStepAndHalvesTheScale) {
  auto exe = scaled(1, 1024);
  exe->find("images").as<float>()[5] = std::numeric_limits<float>::infinity();  // every gradient overflows
  const auto before = floats(*exe, "fc.weight");
  exe->run();
  EXPECT_EQ(floats(*exe, "fc.weight"), before) << "an overflowed step must not change the weights";
  EXPECT_EQ(floats(*exe, "amp.loss_scale")[0], 512.f);
  EXPECT_EQ(floats(*exe, "amp.good_steps")[0], 0.f);
  for (float m : floats(*exe, "fc.weight.momentum")) EXPECT_EQ(m, 0.f);
}

}  // namespace
}  // namespace trident
