// The cuda backend's plan cache (backends/cuda/plan_cache.h): a convolution's tuned cuDNN plan
// is kept in the cache directory, choice and serialized plan, and the next context — what a new
// process would build — loads it untimed, the same plan computing the same bits; without the
// serialized plan it builds the chosen one untimed; a file in place of either that is not the
// cache's is not used and is rewritten. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/temp_dir.h"

#ifdef TRIDENT_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/cudnn_graphs.h"
#include "backends/cuda/plan_cache.h"
#include "core/half.h"
#endif

namespace trident {
namespace {

#ifdef TRIDENT_HAVE_CUDA
// A 3x3 f16 convolution with bias and ReLU (a fused graph cuDNN compiles at run time), 24 images
// of 20x20 with 48 channels: a shape no other test tunes, so this process has not cached its plan.
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
  cuda::FpropFusion f;
  f.bias = true;
  f.relu = true;
  return cuda::fprop_graph(cuda::conv_problem(n, xs, ws, g.value(n.outputs[0]).shape, DType::f16), f);
}

// A graph built in a fresh context whose plan cache is `dir` (autotuning on, the default), with
// that context: a plan runs on the handle it was built with.
struct Built {
  std::unique_ptr<cuda::CudaContext> ctx;
  std::shared_ptr<const cuda::CudnnGraph> graph;
  const cuda::CudnnGraph* operator->() const { return graph.get(); }
  explicit operator bool() const { return graph != nullptr; }
};

Built build_in_new_context(const std::string& dir, const cuda::GraphDesc& d) {
  BackendOptions o;
  o.plan_cache_dir = dir;
  Built b;
  b.ctx = std::make_unique<cuda::CudaContext>(o);
  b.ctx->set_kernel_options({.backend = o});
  const cuda::GraphBuild g = cuda::cached_graph(*b.ctx, d);
  EXPECT_TRUE(g.failure.empty()) << g.failure;
  b.graph = g.graph;
  return b;
}

// The output bits of `graph` on fixed inputs for forward_graph()'s shapes.
std::vector<uint16_t> run_forward(const Built& built) {
  const cuda::CudnnGraph& graph = *built.graph;
  const size_t x_count = 24 * 20 * 20 * 48, w_count = 48 * 3 * 3 * 48;
  std::vector<uint16_t> x(x_count), w(w_count), y(x_count);
  for (size_t i = 0; i < x_count; ++i) x[i] = float_to_half(static_cast<float>(i % 13) / 13.f - 0.4f);
  for (size_t i = 0; i < w_count; ++i) w[i] = float_to_half(static_cast<float>(i % 7) / 50.f - 0.06f);
  const std::vector<float> bias(48, 0.05f);
  std::array<void*, cuda::kMaxGraphUid + 1> at{};
  void* workspace = nullptr;
  EXPECT_EQ(cudaMalloc(&at[cuda::conv_uid::x], x_count * 2), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&at[cuda::conv_uid::w], w_count * 2), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&at[cuda::conv_uid::bias], 48 * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&at[cuda::conv_uid::y], x_count * 2), cudaSuccess);
  if (graph.workspace_bytes() > 0) EXPECT_EQ(cudaMalloc(&workspace, graph.workspace_bytes()), cudaSuccess);
  cudaMemcpy(at[cuda::conv_uid::x], x.data(), x_count * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(at[cuda::conv_uid::w], w.data(), w_count * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(at[cuda::conv_uid::bias], bias.data(), 48 * 4, cudaMemcpyHostToDevice);
  graph.execute(built.ctx->cudnn(), at, workspace);
  EXPECT_EQ(cudaStreamSynchronize(built.ctx->stream()), cudaSuccess);
  cudaMemcpy(y.data(), at[cuda::conv_uid::y], x_count * 2, cudaMemcpyDeviceToHost);
  for (void* p : at)
    if (p) cudaFree(p);
  if (workspace) cudaFree(workspace);
  return y;
}

// The first line of the file at `path`.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The serialized plans under `dir`.
std::vector<std::filesystem::path> blobs_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().extension() == ".plan") found.push_back(e.path());
  return found;
}

TEST(GpuPlanCache, ANoteCarriesThePlansNameAndTime) {
  std::string name;
  float ms = 0.f;
  ASSERT_TRUE(cuda::parse_plan_note(cuda::plan_note("eng41_k2=4_k13=0", 0.0865f), name, ms));
  EXPECT_EQ(name, "eng41_k2=4_k13=0");
  EXPECT_NEAR(ms, 0.0865f, 1e-6);
  for (const char* bad : {"eng48", "eng48 ms", " 0.1 ms", "eng48 0 ms", "eng48 -1 ms", "eng48 nan ms", "eng48 0.1ms",
                          "eng48 0.1 ms extra"})
    EXPECT_FALSE(cuda::parse_plan_note(bad, name, ms)) << bad;
}

TEST(GpuPlanCache, ASecondContextLoadsTheTimedPlanAndComputesTheSameBits) {
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
  EXPECT_EQ(first_line(path), "trident cuda plans 2");
  const std::vector<std::filesystem::path> blobs = blobs_under(dir);
  ASSERT_EQ(blobs.size(), 1u);
  EXPECT_EQ(first_line(blobs[0].string()), "trident plan blob 1");

  const auto second = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->from_plan_cache()) << second->tuning_report();
  EXPECT_NE(second->tuning_report().find("loaded from the plan cache"), std::string::npos) << second->tuning_report();
  EXPECT_EQ(second->plan_name(), first->plan_name());
  EXPECT_EQ(second->workspace_bytes(), first->workspace_bytes());
  // The time it was chosen with comes back too: kernels compare it with their other paths.
  EXPECT_NEAR(second->tuned_ms(), first->tuned_ms(), 1e-4);
  EXPECT_EQ(run_forward(second), run_forward(first));

  // Without the serialized plan, the choice alone: the same plan built untimed.
  std::filesystem::remove(blobs[0]);
  const auto third = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->from_plan_cache()) << third->tuning_report();
  EXPECT_NE(third->tuning_report().find("untimed"), std::string::npos) << third->tuning_report();
  EXPECT_EQ(third->plan_index(), first->plan_index());
  EXPECT_EQ(third->plan_name(), first->plan_name());
  EXPECT_NEAR(third->tuned_ms(), first->tuned_ms(), 1e-4);
  std::filesystem::remove_all(dir);
}

TEST(GpuPlanCache, ADamagedSerializedPlanIsBuiltAgainAndRewritten) {
  TRIDENT_REQUIRE_GPU();
  const std::filesystem::path dir = test_support::fresh_temp_dir("gpu_plan_cache_blob");
  const cuda::GraphDesc d = forward_graph();
  const auto first = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(first);
  const std::vector<std::filesystem::path> blobs = blobs_under(dir);
  ASSERT_EQ(blobs.size(), 1u);
  std::string bytes;
  {
    std::ifstream in(blobs[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 200u);
  bytes[bytes.size() - 100] ^= 0x5a;  // inside the payload: the checksum no longer matches
  { std::ofstream(blobs[0], std::ios::binary) << bytes; }
  const auto second = build_in_new_context(dir.string(), d);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->tuning_report().find("loaded"), std::string::npos) << second->tuning_report();
  EXPECT_EQ(second->plan_name(), first->plan_name());
  const auto third = build_in_new_context(dir.string(), d);  // the file was rewritten whole
  ASSERT_TRUE(third);
  EXPECT_NE(third->tuning_report().find("loaded from the plan cache"), std::string::npos) << third->tuning_report();
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
  EXPECT_EQ(header, "trident cuda plans 2");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace trident
