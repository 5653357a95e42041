// reuse_gradient_buffer: every batchnorm backward of a ResNet writes dconv over its conv_out
// (or, on oneDNN, over dy) and a block end's dresidual over dy where nothing reads them later;
// the memory plan then places those outputs on their inputs' storage, never on a tensor that
// is still read, and the arena shrinks. Training on cpu_ref and on cpu gives the same bits with
// the pass as without it.
#include <gtest/gtest.h>

#include "frontend/zoo.h"
#include "ops/cbr_operands.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/same_steps.h"

namespace trident {
namespace {

passes::CompileOptions training(const std::string& backend, bool with_pass) {
  passes::CompileOptions o = runtime::default_compile_options(passes::Mode::Train);
  o.backend = backend;
  if (backend == "cuda") o.precision = DType::f16;
  if (!with_pass) o.disabled_passes = {"reuse_gradient_buffer"};
  return o;
}

int count_attr(const ir::Graph& g, const std::string& key, const std::string& value) {
  int n = 0;
  for (int id : g.order()) {
    const ir::Node& node = g.node(id);
    if (node.op != "batchnorm_relu_backward" || !node.attrs.has(key)) continue;
    n += value.empty() ? node.attrs.i(key) != 0 : node.attrs.s(key) == value;
  }
  return n;
}

TEST(ReuseGradientBuffer, ResNetBackwardsWriteOverInputsThatDieThere) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  const runtime::CompiledGraph c = runtime::compile_graph(model, training("cuda", true));
  const int backwards = test_support::count_op(c.graph, "batchnorm_relu_backward");
  ASSERT_GT(backwards, 10);
  const int over_conv_out = count_attr(c.graph, "dconv_buffer", "conv_out");
  EXPECT_GT(over_conv_out, backwards / 2);
  EXPECT_GT(count_attr(c.graph, "dresidual_over_dy", ""), 0);
  // The plan puts each output on its input's storage, and that input has no reader after.
  const auto users = c.graph.users();
  std::vector<int> position(c.graph.num_nodes(), -1);
  for (size_t i = 0; i < c.graph.order().size(); ++i) position[c.graph.order()[i]] = static_cast<int>(i);
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op != "batchnorm_relu_backward") continue;
    namespace in = ops::bn_relu_bwd_in;
    namespace out = ops::bn_relu_bwd_out;
    auto check = [&](size_t o, size_t i) {
      EXPECT_EQ(c.plan.placement[n.outputs[o]].offset, c.plan.placement[n.inputs[i]].offset) << n.name;
      for (int u : users[n.inputs[i]]) EXPECT_LE(position[u], position[id]) << n.name << ": read after it";
    };
    const std::string dconv = n.attrs.has("dconv_buffer") ? n.attrs.s("dconv_buffer") : "";
    if (dconv == "conv_out") check(out::dconv, in::conv_out);
    if (dconv == "dy") check(out::dconv, in::dy);
    if (n.attrs.i("dresidual_over_dy", 0)) check(out::dresidual, in::dy);
  }
  const runtime::CompiledGraph without = runtime::compile_graph(model, training("cuda", false));
  EXPECT_LT(c.plan.bytes(plan::Buffer::Arena), without.plan.bytes(plan::Buffer::Arena));
}

TEST(ReuseGradientBuffer, OnOnednnDconvTakesOnlyTheGradientsBuffer) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  const runtime::CompiledGraph c = runtime::compile_graph(model, training("cpu", true));
  EXPECT_EQ(count_attr(c.graph, "dconv_buffer", "conv_out"), 0);
  EXPECT_GT(count_attr(c.graph, "dconv_buffer", "dy") + count_attr(c.graph, "dresidual_over_dy", ""), 0);
}

TEST(ReuseGradientBuffer, TrainingStepsEqualTheStepsWithoutItBitForBit) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  for (const char* backend : {"cpu_ref", "cpu"}) {
    SCOPED_TRACE(backend);
    if (!KernelRegistry::has(backend, "conv2d")) continue;
    auto with = runtime::Executable::compile(model, training(backend, true));
    auto without = runtime::Executable::compile(model, training(backend, false));
    EXPECT_GT(count_attr(with->graph(), "dconv_buffer", std::string(backend) == "cpu" ? "dy" : "conv_out"), 0);
    test_support::expect_bitwise_same_steps(*with, *without, 2, 10);
  }
}

}  // namespace
}  // namespace trident
