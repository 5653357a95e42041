// The cuda convolution kernels' own promises beyond agreement with cpu_ref (which the op case
// table, support/op_cases/conv_cases.cpp, checks on every backend): conv2d_epilogue reports the
// path it takes (one fused graph or conv + epilogue kernel) for every attribute combination;
// identical nodes share one plan through the context's cache; autotuning times candidates and
// keeps a running plan; re-runs are bitwise identical. Every test skips, saying why, where
// there is no GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/graph_runner.h"
#include "support/op_case.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/conv_forward.h"
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/cudnn_graphs.h"
#endif

namespace trident {
namespace {

using ir::Attrs;
using test_support::GraphRunner;
using test_support::op_case;

// 3×3, pad 1, stride 1: the first window of the table's cuda convolution cases.
const Shape kX{2, 8, 8, 16}, kW{32, 3, 3, 16};
Attrs window_attrs() {
  return Attrs{{"stride", std::vector<int64_t>{1, 1}},
               {"padding", std::vector<int64_t>{1, 1}},
               {"dilation", std::vector<int64_t>{1, 1}},
               {"groups", int64_t{1}}};
}

// ---- conv2d_epilogue: the path each attribute combination takes ----

// The table's conv2d_epilogue cases on the first window (every attribute combination, and the
// output in the residual's buffer).
std::vector<std::string> epilogue_cases() {
  std::vector<std::string> names;
  for (const char* bias : {"nobias", "bias"})
    for (const char* residual : {"", "_residual"})
      for (const char* relu : {"", "_relu"}) names.push_back(std::string(bias) + residual + relu);
  names.push_back("bias_residual_relu_inplace");
  names.push_back("nobias_residual_inplace");
  return names;
}

class GpuConvEpilogue : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

#ifdef TRIDENT_HAVE_CUDA
TEST_P(GpuConvEpilogue, ReportsItsPath) {
  TRIDENT_REQUIRE_GPU();
  const auto& [name, dt] = GetParam();
  const ir::Graph g = op_case("conv2d_epilogue_k3_pad1_" + name).build(dt);
  auto ctx = KernelRegistry::make_context("cuda");
  auto kernel = KernelRegistry::make("cuda", g.node(g.order().back()), g, *ctx);
  auto* report = dynamic_cast<cuda::ReportsPath*>(kernel.get());
  ASSERT_NE(report, nullptr) << "the conv2d_epilogue kernel does not report its path";
  std::cout << "conv2d_epilogue " << name << " " << dtype_name(dt) << ": " << report->path() << "\n";
  RecordProperty("path", report->path());
  EXPECT_FALSE(report->path().empty());
}

INSTANTIATE_TEST_SUITE_P(Attrs, GpuConvEpilogue,
                         ::testing::Combine(::testing::ValuesIn(epilogue_cases()),
                                            ::testing::Values(DType::f32, DType::f16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::string(dtype_name(std::get<1>(info.param)));
                         });
#endif

// ---- plan cache and determinism ----

#ifdef TRIDENT_HAVE_CUDA
TEST(GpuConvCache, IdenticalNodesShareOnePlan) {
  TRIDENT_REQUIRE_GPU();
  ir::Graph g;
  const int x = g.add_input("x", kX, DType::f16);
  const int w = g.add_parameter("w", kW, {}, DType::f16);
  g.add_node1("conv2d", {x, w}, window_attrs(), "first");
  g.add_node1("conv2d", {x, w}, window_attrs(), "second");
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
  const Shape xs{32, 28, 28, 64}, ws{64, 3, 3, 64};
  ir::Graph g;
  const int x = g.add_input("x", xs, DType::f16);
  const int w = g.add_parameter("w", ws, {}, DType::f16);
  g.add_node1("conv2d", {x, w}, window_attrs(), "y");
  const ir::Node& n = g.node(g.order().back());
  const cuda::ConvProblem p = cuda::conv_problem(n, xs, ws, g.value(n.outputs[0]).shape, DType::f16);
  for (const cuda::GraphDesc& d : {cuda::fprop_graph(p, {}), cuda::dgrad_graph(p), cuda::wgrad_graph(p)}) {
    auto tuned = cuda::CudnnGraph::build(d, ctx.cudnn(), {true, 8});
    EXPECT_NE(tuned->tuning_report().find("plans timed"), std::string::npos)
        << d.purpose << ": " << tuned->tuning_report();
    EXPECT_FALSE(tuned->plan_name().empty());
    auto plain = cuda::CudnnGraph::build(d, ctx.cudnn(), cuda::PlanPolicy{.prefer_deterministic = true, .tune_candidates = 0});
    EXPECT_TRUE(plain->tuning_report().empty());
  }
  // Whole kernels, tuned (the default) and not, agree with each other.
  auto run = [&](bool tune) {
    test_support::GraphRunner r(g, "cuda");
    r.context().set_kernel_options({.backend = {.autotune = tune}});  // before the first run builds the kernels
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
  for (DType dt : {DType::f32, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_bitwise_rerun(op_case("conv2d_k3_pad1_bias").build(dt), 41);
    expect_bitwise_rerun(op_case("conv2d_backward_data_k3_pad1").build(dt), 42);
    expect_bitwise_rerun(op_case("conv2d_backward_weight_k3_pad1_bias").build(dt), 43);
    expect_bitwise_rerun(op_case("conv2d_epilogue_k3_pad1_bias_residual_relu").build(dt), 44);
  }
}

}  // namespace
}  // namespace trident
