// The cuda backend's plan cache (backends/cuda/plan_cache.h): a convolution's tuned cuDNN plan
// is kept in the cache directory, and the next context — what a new process would build — takes
// it untimed, the same plan; a file in its place that is not a plan cache is not used and is
// rewritten. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/temp_dir.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/cudnn_graphs.h"
#include "backends/cuda/plan_cache.h"
#endif

namespace trident {
namespace {

#ifdef TRIDENT_HAVE_CUDA
// A 3x3 f16 convolution's forward graph, 24 images of 20x20 with 48 channels: a shape no other
// test tunes, so this process has not cached its plan before.
cuda::GraphDesc forward_graph() {
  const Shape xs{24, 20, 20, 48}, ws{48, 3, 3, 48};
  ir::Graph g;
  const int x = g.add_input("x", xs, DType::f16);
  const int w = g.add_parameter("w", ws, {}, DType::f16);
  g.add_node1("conv2d", {x, w},
              ir::Attrs{{"stride", std::vector<int64_t>{1, 1}},
                        {"padding", std::vector<int64_t>{1, 1}},
                        {"dilation", std::vector<int64_t>{1, 1}},
                        {"groups", int64_t{1}}},
              "y");
  const ir::Node& n = g.node(g.order().back());
  return cuda::fprop_graph(cuda::conv_problem(n, xs, ws, g.value(n.outputs[0]).shape, DType::f16), {});
}

// The graph built in a fresh context whose plan cache is `dir` (autotuning on, the default).
std::shared_ptr<const cuda::CudnnGraph> build_in_new_context(const std::string& dir, const cuda::GraphDesc& d) {
  BackendOptions o;
  o.plan_cache_dir = dir;
  cuda::CudaContext ctx(o);
  ctx.set_kernel_options({.backend = o});
  const cuda::GraphBuild b = cuda::cached_graph(ctx, d);
  EXPECT_TRUE(b.failure.empty()) << b.failure;
  return b.graph;
}

TEST(GpuPlanCache, ASecondContextTakesTheTimedPlanUntimed) {
  TRIDENT_REQUIRE_GPU();
  const std::filesystem::path dir = test_support::fresh_temp_dir("gpu_plan_cache");
  const cuda::GraphDesc d = forward_graph();
  const auto first = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->from_plan_cache());
  EXPECT_NE(first->tuning_report().find("plans timed"), std::string::npos) << first->tuning_report();
  std::string path;
  {
    cuda::CudaContext ctx;
    path = cuda::plan_cache_path(ctx, dir.string());
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "trident cuda plans 1");

  const auto second = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->from_plan_cache()) << second->tuning_report();
  EXPECT_EQ(second->plan_name(), first->plan_name());
  EXPECT_EQ(second->plan_index(), first->plan_index());
  EXPECT_EQ(second->tuned_ms(), 0.f);
  std::filesystem::remove_all(dir);
}

TEST(GpuPlanCache, AFileThatIsNoPlanCacheIsTimedAgainAndRewritten) {
  TRIDENT_REQUIRE_GPU();
  const std::filesystem::path dir = test_support::fresh_temp_dir("gpu_plan_cache_bad");
  std::string path;
  {
    cuda::CudaContext ctx;
    path = cuda::plan_cache_path(ctx, dir.string());
  }
  { std::ofstream(path) << "not a plan cache\n"; }
  const auto built = build_in_new_context(dir.string(), forward_graph());
  ASSERT_TRUE(built);
  EXPECT_FALSE(built->from_plan_cache());
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "trident cuda plans 1");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace trident
