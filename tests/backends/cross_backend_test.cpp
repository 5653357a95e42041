// The cpu backend's own promises beyond per-op agreement (which the op case table,
// support/op_cases/, checks on every backend): Winograd convolutions chosen only when asked or
// timed and agreeing with cpu_ref relative to the output's scale; every cpu_ref op covered; f64
// refused by name; identical layers sharing one oneDNN primitive.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "backends/cpu/onednn_context.h"
#include "backends/kernel.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "support/op_case.h"

namespace trident {
namespace {

using ir::Attrs;
using test_support::OpCase;

int producer(const ir::Graph& g, int value) { return g.value(value).producer; }
std::vector<int64_t> v2(int64_t a, int64_t b) { return {a, b}; }

// ---- Winograd: inference convolutions the cpu backend may compute by Winograd's algorithm ----

struct WinogradCase {
  const char* name;
  Shape x, w;
  bool bias, residual, relu;
};

std::ostream& operator<<(std::ostream& os, const WinogradCase& c) { return os << c.name; }

class CpuWinograd : public ::testing::TestWithParam<WinogradCase> {};

// The case's 3×3 stride-1 conv2d_epilogue node (inputs x, w, [b], [residual]).
ir::Graph winograd_graph(const WinogradCase& c, DType d = DType::f32) {
  ir::Graph g;
  const int x = g.add_input("x", c.x, d);
  const int w = g.add_parameter("w", c.w, {}, d);
  std::vector<int> in{x, w};
  Attrs a{{"stride", v2(1, 1)}, {"padding", v2(1, 1)}, {"groups", int64_t{1}}};
  const Shape y{c.x[0], c.x[1], c.x[2], c.w[0]};
  if (c.bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}, d));
  if (c.residual) in.push_back(g.add_input("residual", y, d));
  a.set("has_bias", int64_t{c.bias});
  a.set("residual", int64_t{c.residual});
  a.set("relu", int64_t{c.relu});
  g.add_node1("conv2d_epilogue", in, a, "epilogue");
  return g;
}

// How the cpu backend builds the node with BackendOptions::winograd = `mode` (and autotune).
std::string implementation(const ir::Graph& g, int mode, bool autotune = true) {
  std::shared_ptr<BackendContext> ctx = KernelRegistry::make_context("cpu");
  ctx->set_kernel_options({.backend = {.autotune = autotune, .winograd = mode}, .constant_weights = true});
  return KernelRegistry::make("cpu", g.node(g.order().at(0)), g, *ctx)->implementation();
}

// Requested, Winograd computes the 3x3 stride-1 inference convolution (where oneDNN has it for this
// machine's instruction set) and agrees with cpu_ref's direct sum within the table, relative to the
// output's scale: F(4,3)'s transforms round to ~2e-5 absolute on outputs of magnitude ~10 whatever
// each output's own size (per element, near-zero outputs would fail the f32 atol of 1e-5 although
// the result is as good as Winograd gets).
TEST_P(CpuWinograd, AgreesWithCpuRef) {
  const WinogradCase& p = GetParam();
  const std::string how = implementation(winograd_graph(p), /*winograd=*/1);
  // oneDNN's Winograd needs AVX-512: elsewhere the request keeps the timed direct convolution.
  if (how.rfind("winograd", 0) != 0) GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU: " << how;
  std::cout << "[ winograd ] " << p.name << ": " << how << "\n";
  OpCase c;
  c.name = p.name;
  c.build = [p](DType d) { return winograd_graph(p, d); };
  c.measure = test_support::Measure::OutputScale;
  c.seeds = {11, 12};
  c.options["cpu"] = {.backend = {.autotune = true, .winograd = 1}, .constant_weights = true};
  test_support::check_op_case(c, "cpu", DType::f32);
}

// Off, it never runs (timing chooses among the direct implementations); without autotune, neither
// (oneDNN's first direct implementation runs, untimed, as before there was a choice); automatic
// with autotune, the kernel says which implementation timing chose and every time.
TEST_P(CpuWinograd, OffAndUntimedKeepTheDirectConvolution) {
  const ir::Graph g = winograd_graph(GetParam());
  const std::string off = implementation(g, 0);
  EXPECT_EQ(off.find("winograd"), std::string::npos) << off;
  EXPECT_EQ(implementation(g, 0, /*autotune=*/false), "");
  EXPECT_EQ(implementation(g, -1, /*autotune=*/false), "");
  if (implementation(g, 1).rfind("winograd", 0) != 0) GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU";
  const std::string timed = implementation(g, -1);
  std::cout << "[ timed ] " << GetParam().name << ": " << timed << "\n";
  EXPECT_TRUE(timed.rfind("winograd (", 0) == 0 || timed.rfind("direct (", 0) == 0) << timed;
  EXPECT_NE(timed.find("winograd ("), std::string::npos) << "Winograd was a candidate: " << timed;
  EXPECT_NE(timed.find(" ms"), std::string::npos) << timed;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuWinograd,
    ::testing::Values(WinogradCase{"Batch1BiasRelu", {1, 14, 14, 64}, {64, 3, 3, 64}, true, false, true},
                      WinogradCase{"Batch16ResidualRelu", {16, 12, 12, 32}, {64, 3, 3, 32}, true, true, true},
                      WinogradCase{"Batch8OddSizeNoBias", {8, 9, 11, 64}, {32, 3, 3, 64}, false, false, true}),
    [](const ::testing::TestParamInfo<WinogradCase>& info) { return std::string(info.param.name); });

// ---- coverage, dtype errors, primitive sharing ----

// The ops of docs/OPS.md and every fused op have a kernel on both backends. (A fixed list: ops
// added to cpu_ref later get their cpu kernel, and their entry here, separately.)
TEST(CrossBackend, CpuCoversTheSpecAndFusedOps) {
  const char* ops[] = {"conv2d",
                       "batchnorm2d",
                       "relu",
                       "add",
                       "maxpool2d",
                       "avgpool2d",
                       "global_avgpool",
                       "flatten",
                       "reshape",
                       "linear",
                       "softmax_cross_entropy",
                       "fill",
                       "conv2d_backward_data",
                       "conv2d_backward_weight",
                       "batchnorm2d_backward",
                       "relu_backward",
                       "maxpool2d_backward",
                       "avgpool2d_backward",
                       "global_avgpool_backward",
                       "linear_backward_data",
                       "linear_backward_weight",
                       "softmax_cross_entropy_backward",
                       "sgd_update",
                       "allreduce_mean",
                       "allreduce_wait",
                       "cbr",
                       "cbar",
                       "batchnorm_relu_backward",
                       "conv2d_epilogue",
                       "fold_batchnorm",
                       "elementwise"};
  for (const char* op : ops) {
    EXPECT_TRUE(KernelRegistry::has("cpu_ref", op)) << op;
    EXPECT_TRUE(KernelRegistry::has("cpu", op)) << "cpu has no kernel for " << op;
  }
}

TEST(CrossBackend, CpuRejectsF64ByNodeAndDtype) {
  ir::Graph g;
  int x = g.add_input("x", {1, 5, 5, 2}, DType::f64);
  int w = g.add_parameter("w", {3, 3, 3, 2}, {}, DType::f64);
  int y = g.add_node1("conv2d", {x, w}, {}, "f64_conv");
  try {
    KernelRegistry::make("cpu", g.node(producer(g, y)), g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("f64_conv"), std::string::npos) << m;
    EXPECT_NE(m.find("f64"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
  }
}

// Two layers of one graph, each built in its own context: the second finds the first's primitive in
// the cache.
ir::Graph two_identical_layers(DType d = DType::f32) {
  ir::Graph g;
  const Attrs a{{"padding", v2(1, 1)}};
  int x = g.add_input("x", {2, 13, 13, 24}, d);  // a shape no other test uses
  int w1 = g.add_parameter("w1", {24, 3, 3, 24}, {}, d);
  int w2 = g.add_parameter("w2", {24, 3, 3, 24}, {}, d);
  int y1 = g.add_node1("conv2d", {x, w1}, a, "block.conv1");
  g.add_node1("conv2d", {y1, w2}, a, "block.conv2");
  return g;
}

TEST(CrossBackend, IdenticalConvLayersShareOnePrimitive) {
  const ir::Graph g = two_identical_layers();
  cpu::OnednnContext& ctx = cpu::OnednnContext::instance();
  const int64_t misses0 = ctx.misses();
  auto k1 = KernelRegistry::make("cpu", g.node(g.order()[0]), g);
  const int64_t misses1 = ctx.misses(), hits1 = ctx.hits();
  EXPECT_GT(misses1, misses0) << "the first layer builds its primitive";
  auto k2 = KernelRegistry::make("cpu", g.node(g.order()[1]), g);
  EXPECT_EQ(ctx.misses(), misses1) << "the second, identical layer builds nothing";
  EXPECT_EQ(ctx.hits(), hits1 + (misses1 - misses0)) << "it reuses every primitive of the first";
  // Both still compute the right thing (shared primitive, own scratchpads): small integers, exact
  // in f32 through both layers.
  OpCase c;
  c.name = "two_identical_layers";
  c.build = two_identical_layers;
  c.measure = test_support::Measure::PerElement;
  c.fill = test_support::Fill::SmallInts;
  c.seeds = {11, 12};
  test_support::check_op_case(c, "cpu", DType::f32);
}

}  // namespace
}  // namespace trident
