// Gradient checks through whole tiny networks compiled for training in f64 on the reference
// backend — one of CBR blocks (CBR, residual CBAR-shaped block, max-pool, linear,
// cross-entropy), one of a mobile network's ops (hardswish, a channel shuffle, a squeeze-excitation gate with
// hardsigmoid, SiLU as x·sigmoid(x), ReLU6, a per-channel scale): every parameter gradient of
// the generated backward graph against central differences; and one of the ops DenseNet and
// ShuffleNet v2 import as (pad2d, a channel split, concat).
#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"
#include "frontend/builder.h"
#include "runtime/executable.h"

using namespace trident;

namespace {

ir::Graph tiny_network() {
  ir::Graph g;
  frontend::Builder b(g, DType::f64);
  int x = b.input("images", {3, 6, 6, 2}, DType::f64);
  int a = b.cbr(x, 4, 3, 1, 1, "block1");
  b.push("block2");
  int c = b.batchnorm(b.conv(a, 4, 3, 1, 1, {}, "conv"), "bn");
  c = b.relu(b.add(c, a, "add"), "relu");
  b.pop();
  c = b.maxpool(c, 2, 2, 0, "pool");
  g.mark_output(b.linear(b.flatten(c), 3, true, "fc"));
  return g;
}

// conv → bn → hardswish → channel shuffle → squeeze-excitation (global pool → conv → relu → conv → hardsigmoid
// → mul) → conv → bn → x·sigmoid(x) → clip(0, 6) → per-channel scale → pool → linear.
ir::Graph mobile_network() {
  ir::Graph g;
  frontend::Builder b(g, DType::f64);
  int x = b.input("images", {3, 6, 6, 2}, DType::f64);
  int a = b.activation(b.batchnorm(b.conv(x, 4, 3, 1, 1, {}, "conv1"), "bn1"), "hardswish", "act1");
  a = g.add_node1("channel_shuffle", {a}, {{"groups", int64_t{2}}}, "shuffle");
  int s = b.global_avgpool(a, "se.pool");
  s = b.relu(b.conv(s, 2, 1, 1, 0, {.bias = true}, "se.fc1"), "se.relu");
  s = b.activation(b.conv(s, 4, 1, 1, 0, {.bias = true}, "se.fc2"), "hardsigmoid", "se.gate");
  a = b.mul(a, s, "se.scale");
  int c = b.batchnorm(b.conv(a, 4, 3, 1, 1, {}, "conv2"), "bn2");
  c = b.mul(c, b.activation(c, "sigmoid", "sig"), "silu");
  c = g.add_node1("clip", {c}, {{"min", 0.0}, {"max", 6.0}}, "relu6");
  const int scale = g.add_parameter("channel_scale", {4}, {ir::Init::Ones}, DType::f64);
  c = b.mul(c, scale, "scaled");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(c, "pool")), 3, true, "fc"));
  return g;
}

// DenseNet's and ShuffleNet v2's import: conv → bn → relu → pad2d (a non-zero value, uneven
// counts) → conv → a channel split (channel_slice twice) with one half through a conv → concat →
// channel shuffle → a dense concat with the split tensor → average pooling → linear. The split
// tensor's gradient is two placed slices and a concat's slice (join_channel_gradients).
ir::Graph dense_shuffle_network() {
  ir::Graph g;
  frontend::Builder b(g, DType::f64);
  int x = b.input("images", {3, 6, 6, 2}, DType::f64);
  int a = b.relu(b.batchnorm(b.conv(x, 4, 3, 1, 1, {}, "conv1"), "bn1"), "relu1");
  a = g.add_node1("pad2d", {a}, {{"pads", std::vector<int64_t>{1, 0, 1, 2}}, {"value", 0.5}}, "pad");
  const int t = b.conv(a, 4, 3, 1, 0, {}, "conv2");  // [3, 6, 7, 4]
  const int s0 = g.add_node1("channel_slice", {t}, {{"start", int64_t{0}}, {"channels", int64_t{2}}}, "split.0");
  const int s1 = g.add_node1("channel_slice", {t}, {{"start", int64_t{2}}, {"channels", int64_t{2}}}, "split.1");
  const int br = b.relu(b.conv(s1, 2, 1, 1, 0, {.bias = true}, "branch"), "branch.relu");
  int c = g.add_node1("concat", {s0, br}, {}, "cat");
  c = g.add_node1("channel_shuffle", {c}, {{"groups", int64_t{2}}}, "shuffle");
  c = g.add_node1("concat", {c, t}, {}, "dense");
  c = b.avgpool(c, 2, 2, 0, "pool");
  g.mark_output(b.linear(b.flatten(c), 3, true, "fc"));
  return g;
}

void expect_gradients_match_central_differences(const ir::Graph& model) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.optimizer = false;
  auto exe = runtime::Executable::compile(model, o);
  exe->init_parameters(7);
  Rng rng(3);
  TensorView images = exe->find("images"), labels = exe->find("labels");
  for (int64_t i = 0; i < images.numel(); ++i) images.as<double>()[i] = rng.uniform(-1, 1);
  for (int64_t i = 0; i < labels.numel(); ++i) labels.as<int32_t>()[i] = static_cast<int32_t>(i % 3);

  auto loss = [&] {
    exe->run();
    return exe->view(exe->loss()).as<double>()[0];
  };
  loss();
  ASSERT_FALSE(exe->param_grads().empty());
  int checked = 0;
  for (auto [p, gp] : exe->param_grads()) {
    TensorView param = exe->view(p);
    std::vector<double> analytic(exe->view(gp).as<double>(), exe->view(gp).as<double>() + param.numel());
    const int64_t stride = std::max<int64_t>(1, param.numel() / 12);  // up to ~12 points per tensor
    for (int64_t i = 0; i < param.numel(); i += stride) {
      double& w = param.as<double>()[i];
      const double saved = w, h = 1e-6;
      w = saved + h;
      const double up = loss();
      w = saved - h;
      const double down = loss();
      w = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, 1e-6 + 1e-5 * std::abs(numeric))
          << exe->graph().value(p).name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

}  // namespace

TEST(NetworkGradcheck, EveryParameterGradientMatchesCentralDifferences) {
  expect_gradients_match_central_differences(tiny_network());
}

TEST(NetworkGradcheck, MobileOpsGradientsMatchCentralDifferences) {
  expect_gradients_match_central_differences(mobile_network());
}

TEST(NetworkGradcheck, PadSplitAndConcatGradientsMatchCentralDifferences) {
  expect_gradients_match_central_differences(dense_shuffle_network());
}
