// cancel_conv_bias: structural (which fused nodes take the attribute), negative (no bias, the
// pass off), numerical (a training step with the bias cancelled equals the same step with the
// pass off on the cpu backend: loss, parameters, running statistics; the bias's gradient is
// exactly zero).
#include <gtest/gtest.h>

#include "core/random.h"
#include "frontend/builder.h"
#include "ops/cbr_operands.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/tolerance.h"

using namespace trident;
using test_support::count_op;

namespace {

// stem: conv with a bias → bn → relu (cbr); block: conv with a bias → bn → add → relu (cbar);
// tail: conv without a bias → bn → relu (cbr).
ir::Graph model_with_biases(DType dt) {
  ir::Graph model;
  frontend::Builder b(model, dt);
  int x = b.input("images", {4, 8, 8, 3}, dt);
  int a = b.relu(b.batchnorm(b.conv(x, 8, 3, 1, 1, {.bias = true}, "stem"), "stem_bn"), "stem_relu");
  int c = b.batchnorm(b.conv(a, 8, 3, 1, 1, {.bias = true}, "conv"), "bn");
  c = b.relu(b.add(c, a, "add"), "relu");
  c = b.cbr(c, 8, 3, 1, 1, "tail");
  model.mark_output(b.linear(b.flatten(b.global_avgpool(c)), 5, true, "fc"));
  return model;
}

passes::CompileOptions train_options(const std::string& backend) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.backend = backend;
  return o;
}

int cancelled(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order()) n += ops::has_cancelled_bias(g.node(id));
  return n;
}

}  // namespace

TEST(CancelConvBias, EveryFusedConvolutionWithABiasAndOnlyThose) {
  const auto c = runtime::compile_graph(model_with_biases(DType::f32), train_options("cpu_ref"));
  EXPECT_EQ(count_op(c.graph, "cbr"), 2);
  EXPECT_EQ(count_op(c.graph, "cbar"), 1);
  EXPECT_EQ(cancelled(c.graph), 2);
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op == "cbr" || n.op == "cbar") {
      EXPECT_EQ(ops::has_cancelled_bias(n), ops::CbrOperands::of(n).bias >= 0) << n.name;
    }
    // The bias's gradient comes from no reduction: conv2d_backward_weight computes only dw.
    if (n.op == "conv2d_backward_weight") {
      EXPECT_EQ(n.outputs.size(), 1u) << n.name;
    }
  }
  int records = 0;
  for (const auto& f : c.fusions) records += f.pass == "cancel_conv_bias";
  EXPECT_EQ(records, 2);
}

TEST(CancelConvBias, OffSwitchKeepsTheBiasInTheConvolution) {
  auto o = train_options("cpu_ref");
  o.disabled_passes = {"cancel_conv_bias"};
  const auto c = runtime::compile_graph(model_with_biases(DType::f32), o);
  EXPECT_EQ(cancelled(c.graph), 0);
  // Unfused (no cbr), nothing is cancelled either: the pass only rewrites fused nodes.
  o.disabled_passes = {"fuse_conv_bn_relu"};
  EXPECT_EQ(cancelled(runtime::compile_graph(model_with_biases(DType::f32), o).graph), 0);
}

TEST(CancelConvBias, BiasGradientIsExactlyZero) {
  auto o = train_options("cpu_ref");
  o.optimizer = false;  // parameter gradients become graph outputs
  auto exe = runtime::Executable::compile(model_with_biases(DType::f32), o);
  exe->init_parameters(3);
  Rng r(3);
  TensorView img = exe->find("images"), lab = exe->find("labels");
  for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(r.uniform(-1, 1));
  for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
  exe->run();
  int checked = 0;
  for (auto [param, grad] : exe->param_grads()) {
    const std::string& name = exe->graph().value(param).name;
    if (name != "stem.bias" && name != "conv.bias") continue;
    TensorView gv = exe->view(grad);
    for (int64_t i = 0; i < gv.numel(); ++i) EXPECT_EQ(gv.as<float>()[i], 0.f) << name << "[" << i << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Three SGD steps (momentum, weight decay) on the cpu backend, with the bias cancelled and with
// the pass off: the loss, every parameter (the biases too: weight decay moves them alike) and
// the running statistics agree.
TEST(CancelConvBias, TrainingStepsEqualTheStepsWithThePassOff) {
  const ir::Graph model = model_with_biases(DType::f32);
  auto on_opt = train_options("cpu");
  auto off_opt = on_opt;
  off_opt.disabled_passes = {"cancel_conv_bias"};
  auto on = runtime::Executable::compile(model, on_opt);
  auto off = runtime::Executable::compile(model, off_opt);
  EXPECT_EQ(cancelled(on->graph()), 2);
  EXPECT_EQ(cancelled(off->graph()), 0);
  for (auto* exe : {on.get(), off.get()}) {
    exe->init_parameters(5);
    // Biases far from zero, so a running mean without them would be visibly wrong.
    for (const char* bias : {"stem.bias", "conv.bias"}) {
      TensorView b = exe->find(bias);
      for (int64_t i = 0; i < b.numel(); ++i) b.as<float>()[i] = 0.5f + 0.25f * static_cast<float>(i);
    }
    exe->prepare();
    Rng r(1);
    TensorView img = exe->find("images"), lab = exe->find("labels");
    for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(r.uniform(-1, 1));
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
    exe->find("lr").as<float>()[0] = 0.1f;
  }
  for (int step = 0; step < 3; ++step) {
    on->run();
    off->run();
    EXPECT_NEAR(on->view(on->loss()).as<float>()[0], off->view(off->loss()).as<float>()[0], 1e-5);
  }
  for (int v = 0; v < off->graph().num_values(); ++v) {
    const ir::Value& val = off->graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    TensorView p = off->view(v), f = on->find(val.name);
    if (p.dtype != DType::f32) continue;  // the step counter and the like
    std::vector<double> pv(p.as<float>(), p.as<float>() + p.numel()), fv(f.as<float>(), f.as<float>() + f.numel());
    test_support::expect_close(fv, pv, DType::f32, val.name);
  }
}
