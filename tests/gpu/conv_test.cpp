// The cuda convolution kernels against cpu_ref: conv2d (± bias), conv2d_backward_data and
// conv2d_backward_weight (± db) over the window shapes that matter (3×3 pad 1, 1×1, stride 2,
// three input channels, groups 2, dilation 2) in f32 (TF32 allowed, so the f16 row) and f16;
// conv2d_epilogue in every attribute combination and with the output in the residual's
// buffer; one plan shared by identical nodes through the context's cache; bitwise-identical
// re-runs. Every test skips, saying why, where there is no GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/graph_runner.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/conv_forward.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/cudnn_graphs.h"
#endif

namespace trident {
namespace {

using ir::Attrs;
using test_support::compare_with_cpu_ref;
using test_support::GraphRunner;

struct ConvCase {
  std::string name;
  Shape x, w;
  int64_t stride = 1, pad = 0, dil = 1, groups = 1;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"k3_pad1", {2, 8, 8, 16}, {32, 3, 3, 16}, 1, 1, 1, 1},
      {"k1", {2, 8, 8, 16}, {24, 1, 1, 16}, 1, 0, 1, 1},
      {"k3_stride2", {2, 9, 9, 8}, {16, 3, 3, 8}, 2, 1, 1, 1},
      {"three_input_channels", {2, 8, 8, 3}, {16, 3, 3, 3}, 1, 1, 1, 1},
      {"groups2", {2, 8, 8, 16}, {32, 3, 3, 8}, 1, 1, 1, 2},
      {"dilation2", {1, 10, 10, 8}, {8, 3, 3, 8}, 1, 2, 2, 1},
  };
}

Attrs window_attrs(const ConvCase& c) {
  return Attrs{{"stride", std::vector<int64_t>{c.stride, c.stride}},
               {"padding", std::vector<int64_t>{c.pad, c.pad}},
               {"dilation", std::vector<int64_t>{c.dil, c.dil}},
               {"groups", c.groups}};
}

Shape output_shape(const ConvCase& c) {
  auto extent = [&](int64_t in, int64_t k) { return (in + 2 * c.pad - c.dil * (k - 1) - 1) / c.stride + 1; };
  return {c.x[0], extent(c.x[1], c.w[1]), extent(c.x[2], c.w[2]), c.w[0]};
}

// The names of the values a one-node graph's node writes (what the test compares).
std::vector<std::string> node_outputs(const ir::Graph& g) {
  std::vector<std::string> names;
  for (int v : g.node(g.order().back()).outputs) names.push_back(g.value(v).name);
  return names;
}

ir::Graph forward_graph(const ConvCase& c, bool bias, DType dt) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", c.x, dt), g.add_parameter("w", c.w, {}, dt)};
  if (bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}, dt));
  g.add_node1("conv2d", in, window_attrs(c), "conv");
  return g;
}

ir::Graph dgrad_graph(const ConvCase& c, DType dt) {
  ir::Graph g;
  Attrs a = window_attrs(c);
  a.set("input_shape", std::vector<int64_t>(c.x.begin(), c.x.end()));
  g.add_node1("conv2d_backward_data", {g.add_input("dy", output_shape(c), dt), g.add_parameter("w", c.w, {}, dt)}, a,
              "dgrad");
  return g;
}

ir::Graph wgrad_graph(const ConvCase& c, bool bias, DType dt) {
  ir::Graph g;
  Attrs a = window_attrs(c);
  a.set("weight_shape", std::vector<int64_t>(c.w.begin(), c.w.end()));
  a.set("has_bias", int64_t{bias});
  g.add_node("conv2d_backward_weight", {g.add_input("x", c.x, dt), g.add_input("dy", output_shape(c), dt)}, a,
             "wgrad");
  return g;
}

// The reduced-precision row: f16 storage, or f32 with TF32 tensor cores.
DType row_for(DType dt) { return dt == DType::bf16 ? DType::bf16 : DType::f16; }

class GpuConv : public ::testing::TestWithParam<std::tuple<ConvCase, DType>> {};

TEST_P(GpuConv, ForwardMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const auto& [c, dt] = GetParam();
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "with bias" : "without bias");
    const ir::Graph gpu = forward_graph(c, bias, dt), ref = forward_graph(c, bias, DType::f32);
    compare_with_cpu_ref(gpu, ref, node_outputs(gpu), row_for(dt), 11);
  }
}

TEST_P(GpuConv, DgradMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const auto& [c, dt] = GetParam();
  const ir::Graph gpu = dgrad_graph(c, dt), ref = dgrad_graph(c, DType::f32);
  compare_with_cpu_ref(gpu, ref, node_outputs(gpu), row_for(dt), 12);
}

TEST_P(GpuConv, WgradMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const auto& [c, dt] = GetParam();
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "with db" : "without db");
    const ir::Graph gpu = wgrad_graph(c, bias, dt), ref = wgrad_graph(c, bias, DType::f32);
    compare_with_cpu_ref(gpu, ref, node_outputs(gpu), row_for(dt), 13);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuConv,
                         ::testing::Combine(::testing::ValuesIn(conv_cases()),
                                            ::testing::Values(DType::f32, DType::f16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// The bias gradient's channel sums over many rows (several row blocks, rows not a multiple
// of a block) in the 16-byte path (K % 8 = 0) and the scalar path (K = 10, 12 in f16).
TEST(GpuConvBiasGradient, ChannelSumsOverManyRowsAndOddChannelCounts) {
  TRIDENT_REQUIRE_GPU();
  for (int64_t k : {int64_t{64}, int64_t{10}, int64_t{12}})
    for (DType dt : {DType::f32, DType::f16}) {
      SCOPED_TRACE("K " + std::to_string(k) + " " + std::string(dtype_name(dt)));
      const ConvCase c{"rows", {9, 31, 33, 8}, {k, 1, 1, 8}, 1, 0, 1, 1};
      const ir::Graph gpu = wgrad_graph(c, true, dt), ref = wgrad_graph(c, true, DType::f32);
      compare_with_cpu_ref(gpu, ref, node_outputs(gpu), row_for(dt), 61);
    }
}

TEST(GpuConvBf16, ForwardAndGradientsMatchCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const ConvCase c = conv_cases()[0];
  compare_with_cpu_ref(forward_graph(c, true, DType::bf16), forward_graph(c, true, DType::f32), {"conv"},
                       DType::bf16, 14);
  compare_with_cpu_ref(dgrad_graph(c, DType::bf16), dgrad_graph(c, DType::f32), {"dgrad"}, DType::bf16, 15);
  const ir::Graph gw = wgrad_graph(c, true, DType::bf16);
  compare_with_cpu_ref(gw, wgrad_graph(c, true, DType::f32), node_outputs(gw), DType::bf16, 16);
}

// ---- conv2d_epilogue ----

struct EpilogueCase {
  bool bias, residual, relu, in_place;
  std::string name() const {
    std::string s = std::string(bias ? "bias" : "nobias") + (residual ? "_residual" : "") + (relu ? "_relu" : "");
    return s + (in_place ? "_inplace" : "");
  }
};

ir::Graph epilogue_graph(const ConvCase& c, const EpilogueCase& e, DType dt) {
  ir::Graph g;
  std::vector<int> in{g.add_input("x", c.x, dt), g.add_parameter("w", c.w, {}, dt)};
  if (e.bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}, dt));
  if (e.residual) in.push_back(g.add_input("residual", output_shape(c), dt));
  Attrs a = window_attrs(c);
  a.set("has_bias", int64_t{e.bias});
  a.set("residual", int64_t{e.residual});
  a.set("relu", int64_t{e.relu});
  if (e.in_place) a.set("inplace_residual", int64_t{1});
  g.add_node1("conv2d_epilogue", in, a, "epilogue");
  return g;
}

std::vector<EpilogueCase> epilogue_cases() {
  std::vector<EpilogueCase> cases;
  for (bool bias : {false, true})
    for (bool residual : {false, true})
      for (bool relu : {false, true}) cases.push_back({bias, residual, relu, false});
  cases.push_back({true, true, true, true});
  cases.push_back({false, true, false, true});
  return cases;
}

#ifdef TRIDENT_HAVE_CUDA
// Which path (one fused graph or conv + epilogue kernel) the kernel of `g`'s node takes.
std::string kernel_path(const ir::Graph& g) {
  auto ctx = KernelRegistry::make_context("cuda");
  const ir::Node& n = g.node(g.order().back());
  auto kernel = KernelRegistry::make("cuda", n, g, *ctx);
  auto* report = dynamic_cast<cuda::ReportsPath*>(kernel.get());
  return report ? report->path() : "(kernel does not report its path)";
}
#endif

class GpuConvEpilogue : public ::testing::TestWithParam<std::tuple<EpilogueCase, DType>> {};

TEST_P(GpuConvEpilogue, MatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const auto& [e, dt] = GetParam();
  const ConvCase c = conv_cases()[0];
  const ir::Graph gpu = epilogue_graph(c, e, dt), ref = epilogue_graph(c, e, DType::f32);
#ifdef TRIDENT_HAVE_CUDA
  const std::string path = kernel_path(gpu);
  std::cout << "conv2d_epilogue " << e.name() << " " << dtype_name(dt) << ": " << path << "\n";
  RecordProperty("path", path);
#endif
  compare_with_cpu_ref(gpu, ref, {"epilogue"}, row_for(dt), 21);
}

INSTANTIATE_TEST_SUITE_P(Attrs, GpuConvEpilogue,
                         ::testing::Combine(::testing::ValuesIn(epilogue_cases()),
                                            ::testing::Values(DType::f32, DType::f16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name() + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// ---- plan cache and determinism ----

#ifdef TRIDENT_HAVE_CUDA
TEST(GpuConvCache, IdenticalNodesShareOnePlan) {
  TRIDENT_REQUIRE_GPU();
  const ConvCase c = conv_cases()[0];
  ir::Graph g;
  const int x = g.add_input("x", c.x, DType::f16);
  const int w = g.add_parameter("w", c.w, {}, DType::f16);
  g.add_node1("conv2d", {x, w}, window_attrs(c), "first");
  g.add_node1("conv2d", {x, w}, window_attrs(c), "second");
  GraphRunner runner(g, "cuda");
  runner.randomize(31);
  runner.run();
  auto& ctx = cuda::cuda_context(runner.context());
  EXPECT_EQ(ctx.cache_misses(), 1) << ctx.cache_report();
  EXPECT_EQ(ctx.cache_hits(), 1) << ctx.cache_report();
  EXPECT_EQ(runner.values(g.find_value("first")), runner.values(g.find_value("second")));
}
#endif

#ifdef TRIDENT_HAVE_CUDA
// Autotuning times several of cuDNN's candidate plans on scratch tensors and keeps one that
// runs; the tuned plan gives the heuristic plan's results within the f16 row.
TEST(GpuConvTuning, TimesCandidatesAndKeepsARunningPlan) {
  TRIDENT_REQUIRE_GPU();
  cuda::CudaContext ctx;
  ConvCase c{"big", {32, 28, 28, 64}, {64, 3, 3, 64}, 1, 1, 1, 1};
  ir::Graph g;
  const int x = g.add_input("x", c.x, DType::f16);
  const int w = g.add_parameter("w", c.w, {}, DType::f16);
  g.add_node1("conv2d", {x, w}, window_attrs(c), "y");
  const ir::Node& n = g.node(g.order().back());
  const cuda::ConvProblem p = cuda::conv_problem(n, c.x, c.w, g.value(n.outputs[0]).shape, DType::f16);
  for (const cuda::GraphDesc& d : {cuda::fprop_graph(p, {}), cuda::dgrad_graph(p), cuda::wgrad_graph(p)}) {
    auto tuned = cuda::CudnnGraph::build(d, ctx.cudnn(), {true, 8});
    EXPECT_NE(tuned->tuning_report().find("plans timed"), std::string::npos)
        << d.purpose << ": " << tuned->tuning_report();
    EXPECT_FALSE(tuned->plan_name().empty());
    auto plain = cuda::CudnnGraph::build(d, ctx.cudnn(), {true, 0});
    EXPECT_TRUE(plain->tuning_report().empty());
  }
  // Whole kernels, tuned (the default) and not, agree with each other.
  auto run = [&](bool tune) {
    test_support::GraphRunner r(g, "cuda");
    r.context().set_autotune(tune);  // before the first run builds the kernels
    r.randomize(17);
    r.run();
    return r.values(g.find_value("y"));
  };
  test_support::expect_close_scaled(run(true), run(false), DType::f16, "tuned vs heuristic conv");
}
#endif

// Runs `g` twice on cuda with the same inputs; every output of its node must be bitwise equal.
void expect_bitwise_rerun(const ir::Graph& g, uint64_t seed) {
  GraphRunner runner(g, "cuda");
  runner.randomize(seed);
  std::vector<std::vector<std::byte>> first;
  const std::vector<int>& outs = g.node(g.order().back()).outputs;
  runner.run();
  for (int v : outs) {
    TensorView t = runner.view(v);
    first.emplace_back(static_cast<std::byte*>(t.data), static_cast<std::byte*>(t.data) + t.bytes());
  }
  runner.run(3);
  for (size_t i = 0; i < outs.size(); ++i) {
    TensorView t = runner.view(outs[i]);
    EXPECT_EQ(0, std::memcmp(first[i].data(), t.data, t.bytes())) << g.value(outs[i]).name << " changed on re-run";
  }
}

TEST(GpuConvDeterminism, RerunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ConvCase c = conv_cases()[0];
  for (DType dt : {DType::f32, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_bitwise_rerun(forward_graph(c, true, dt), 41);
    expect_bitwise_rerun(dgrad_graph(c, dt), 42);
    expect_bitwise_rerun(wgrad_graph(c, true, dt), 43);
    expect_bitwise_rerun(epilogue_graph(c, {true, true, true, false}, dt), 44);
  }
}

}  // namespace
}  // namespace trident
