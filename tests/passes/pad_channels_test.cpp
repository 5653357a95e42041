// Channel padding (pad_channels + resize_channels): the reference kernel grows and shrinks the
// last axis; its backward (the opposite resize) passes finite differences; the pass pads only
// convolutions whose input channels do not fill 16 bytes, once per shared value, is on by
// default for the cuda backend only, and leaves the user's shapes (parameters, gradients,
// logits) alone. A padded training step and a padded inference on cpu_ref equal the unpadded
// ones bit for bit: the extra channels only ever multiply zeros.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/gradcheck.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

using namespace trident::testing;
using trident::testing::HostTensor;  // the test helper, not trident::HostTensor

TEST(ResizeChannels, GrowsWithZerosAndShrinksByCutting) {
  HostTensor x = HostTensor::of({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor grown({2, 5}, DType::f64), cut({2, 2}, DType::f64);
  run_op("resize_channels", {{"channels", int64_t{5}}}, {&x}, {&grown});
  expect_values(grown, {1, 2, 3, 0, 0, 4, 5, 6, 0, 0}, 0);
  run_op("resize_channels", {{"channels", int64_t{2}}}, {&x}, {&cut});
  expect_values(cut, {1, 2, 4, 5}, 0);
}

TEST(ResizeChannels, BackwardIsTheOppositeResize) {
  std::mt19937 rng(5);
  const Shape s{2, 3, 3, 3};
  HostTensor x = random_tensor(s, rng), g = random_tensor({2, 3, 3, 8}, rng);
  auto loss = [&] {
    HostTensor y({2, 3, 3, 8}, DType::f64);
    run_op("resize_channels", {{"channels", int64_t{8}}}, {&x}, {&y});
    return weighted_sum(g, y);
  };
  // The backward graph resizes dy back to 3 channels.
  ir::Graph graph;
  const int xv = graph.add_input("x", s, DType::f64);
  const int y = graph.add_node1("resize_channels", {xv}, {{"channels", int64_t{8}}}, "pad");
  const int dy = graph.add_input("dy", graph.value(y).shape, DType::f64);
  const auto dxs = ir::OpRegistry::get("resize_channels").backward(graph, graph.node(graph.value(y).producer), {dy});
  ASSERT_EQ(dxs.size(), 1u);
  const ir::Node& back = graph.node(graph.value(dxs[0]).producer);
  EXPECT_EQ(back.op, "resize_channels");
  EXPECT_EQ(graph.value(dxs[0]).shape, s);
  HostTensor dx(s, DType::f64);
  run_op("resize_channels", back.attrs, {&g}, {&dx});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
}

passes::CompileOptions options(passes::Mode mode, int padding, const std::string& backend = "cpu_ref") {
  passes::CompileOptions o;
  o.mode = mode;
  o.backend = backend;
  o.channel_padding = padding;
  return o;
}

TEST(PadChannels, PadsOnlyConvolutionsWhoseChannelsDoNotFillSixteenBytes) {
  // resnet_cifar: the stem reads the 3-channel image; every other convolution has 16k channels.
  const ir::Graph model = frontend::build_model("resnet_cifar", {2});
  const runtime::CompiledGraph c = runtime::compile_graph(model, options(passes::Mode::Train, 1));
  const ir::Graph& g = c.graph;
  int forward = 0, backward = 0;
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    if (n.op == "resize_channels") (n.name.find(".backward") == std::string::npos ? forward : backward)++;
    if (n.op == "cbr" || n.op == "cbar" || n.op == "conv2d") {
      EXPECT_EQ(g.value(n.inputs[0]).shape.back() % 4, 0) << n.name << " reads f32 channels in 16-byte vectors";
      EXPECT_EQ(g.value(n.inputs[1]).shape.back(), g.value(n.inputs[0]).shape.back()) << n.name;
    }
  }
  EXPECT_EQ(forward, 2) << "the image and the stem's weight, each padded once";
  EXPECT_EQ(backward, 1) << "the stem's weight gradient is cut back (the image needs no gradient)";
  for (auto [p, grad] : c.param_grads) EXPECT_EQ(g.value(p).shape, g.value(grad).shape) << g.value(p).name;
}

TEST(PadChannels, AnImageOfUpToFourChannelsBecomesFourInHalfPrecision) {
  // cuDNN's 4-channel NHWC kernels serve the stem; wider odd counts fill 16-byte vectors.
  ir::Graph model;
  frontend::Builder b(model);
  int x = b.input("images", {2, 12, 12, 3});
  x = b.cbr(x, 5, 3, 1, 1, "stem");
  x = b.cbr(x, 16, 3, 1, 1, "odd");
  model.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  passes::CompileOptions o = options(passes::Mode::Train, 1, "cuda");
  o.precision = DType::f16;
  const runtime::CompiledGraph c = runtime::compile_graph(model, o);
  std::vector<int64_t> widths;
  for (int nid : c.graph.order()) {
    const ir::Node& n = c.graph.node(nid);
    // Activations only: not the weights' copies, not the backward's cuts.
    const bool activation = n.name.find("weight") == std::string::npos && n.name.find(".backward") == std::string::npos;
    if (n.op == "resize_channels" && activation) widths.push_back(c.graph.value(n.outputs[0]).shape.back());
  }
  EXPECT_EQ(widths, (std::vector<int64_t>{4, 8})) << "the image to 4 channels, the 5-channel activation to 8";
}

TEST(PadChannels, OnByDefaultForTheGpuBackendOnly) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {2});
  EXPECT_EQ(test_support::count_op(runtime::compile_graph(model, options(passes::Mode::Infer, -1)).graph,
                                   "resize_channels"), 0);
  EXPECT_GT(test_support::count_op(runtime::compile_graph(model, options(passes::Mode::Infer, -1, "cuda")).graph,
                                   "resize_channels"), 0);
  EXPECT_EQ(test_support::count_op(runtime::compile_graph(model, options(passes::Mode::Infer, 0, "cuda")).graph,
                                   "resize_channels"), 0);
  passes::CompileOptions off = options(passes::Mode::Train, -1, "cuda");
  off.disabled_passes = {"pad_channels"};
  EXPECT_EQ(test_support::count_op(runtime::compile_graph(model, off).graph, "resize_channels"), 0);
}

std::unique_ptr<runtime::Executable> make(const std::string& model, passes::Mode mode, int padding) {
  auto exe = runtime::Executable::compile(frontend::build_model(model, {4}), options(mode, padding));
  exe->init_parameters(11);
  Rng rng(12);
  TensorView x = exe->host_view(exe->value_id("images"));
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  if (exe->has("labels")) {
    TensorView y = exe->host_view(exe->value_id("labels"));
    for (int64_t i = 0; i < y.numel(); ++i) y.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
    exe->host_view(exe->value_id("lr")).as<float>()[0] = 0.05f;
  }
  return exe;
}

bool same_bits(const TensorView& a, const TensorView& b) {
  return a.shape == b.shape && a.dtype == b.dtype && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

TEST(PadChannels, PaddedTrainingStepsEqualUnpaddedBitForBit) {
  for (const char* model : {"fmnist_cnn", "resnet_cifar"}) {
    auto plain = make(model, passes::Mode::Train, 0), padded = make(model, passes::Mode::Train, 1);
    ASSERT_GT(test_support::count_op(padded->graph(), "resize_channels"), 0) << model;
    for (int step = 0; step < 2; ++step) {
      plain->run();
      padded->run();
    }
    EXPECT_TRUE(same_bits(plain->find(plain->graph().value(plain->loss()).name),
                          padded->find(padded->graph().value(padded->loss()).name)))
        << model << ": loss";
    for (int v : plain->graph().values_with_role(ir::ValueRole::Parameter)) {
      const std::string& name = plain->graph().value(v).name;
      EXPECT_TRUE(same_bits(plain->find(name), padded->find(name))) << model << ": " << name;
    }
  }
}

TEST(PadChannels, PaddedInferenceEqualsUnpaddedBitForBit) {
  auto plain = make("resnet_cifar", passes::Mode::Infer, 0), padded = make("resnet_cifar", passes::Mode::Infer, 1);
  ASSERT_GT(test_support::count_op(padded->graph(), "resize_channels"), 0);
  plain->run();
  padded->run();
  EXPECT_TRUE(same_bits(plain->find(plain->graph().value(plain->logits()).name),
                        padded->find(padded->graph().value(padded->logits()).name)));
}

}  // namespace
}  // namespace trident
