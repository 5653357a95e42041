// allreduce_gradients: structural (one node per bucket, the last layer's gradients first, every
// gradient exactly once, sgd_update reading the averaged values), negative (a single process
// plans no collective), and the kernel's refusals where the plan and the world disagree. The
// collective itself runs under mpirun: runtime/distributed/data_parallel_mpi.cpp.
#include <gtest/gtest.h>

#include <set>

#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/error_of.h"
#include "support/graph_queries.h"

using namespace trident;
using test_support::count_op;

namespace {

runtime::CompiledGraph compiled(int world_size, int64_t bucket_bytes, bool optimizer = true) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cpu_ref";
  opt.world_size = world_size;
  opt.allreduce_bucket_bytes = bucket_bytes;
  opt.optimizer = optimizer;
  return runtime::compile_graph(frontend::build_model("resnet_cifar", {.batch = 2}), opt);
}

std::vector<int> nodes_of(const ir::Graph& g, const std::string& op) {
  std::vector<int> out;
  for (int id : g.order())
    if (g.node(id).op == op) out.push_back(id);
  return out;
}

}  // namespace

TEST(AllreduceGradients, ASingleProcessPlansNoCollective) {
  EXPECT_EQ(count_op(compiled(1, 25 << 20).graph, "allreduce_mean"), 0);
}

TEST(AllreduceGradients, BucketsCoverEveryGradientOnceInBackwardOrderBeforeTheOptimizer) {
  const runtime::CompiledGraph one = compiled(2, int64_t{25} << 20);
  EXPECT_EQ(count_op(one.graph, "allreduce_mean"), 1);  // ResNet-20's 1 MiB of gradients: one bucket

  const runtime::CompiledGraph c = compiled(2, 16 << 10);
  const ir::Graph& g = c.graph;
  const std::vector<int> buckets = nodes_of(g, "allreduce_mean"), sgd = nodes_of(g, "sgd_update");
  ASSERT_EQ(sgd.size(), 1u);
  ASSERT_GT(buckets.size(), 4u);
  std::set<int> reduced, averaged;
  for (int b : buckets) {
    const ir::Node& n = g.node(b);
    EXPECT_EQ(n.attrs.i("world_size"), 2);
    reduced.insert(n.inputs.begin(), n.inputs.end());
    averaged.insert(n.outputs.begin(), n.outputs.end());
  }
  EXPECT_EQ(reduced.size(), c.param_grads.size());
  for (auto [p, gp] : c.param_grads) EXPECT_TRUE(reduced.count(gp)) << g.value(p).name;
  // Backward order: the first bucket holds the classifier's gradient, the last the first conv's.
  EXPECT_EQ(g.node(buckets.front()).inputs.front(), c.param_grads.back().second);
  EXPECT_EQ(g.node(buckets.back()).inputs.back(), c.param_grads.front().second);
  // The buckets run right before the optimizer, which reads only averaged gradients.
  const auto& order = g.order();
  const auto sgd_at = std::find(order.begin(), order.end(), sgd[0]);
  EXPECT_EQ(std::find(order.begin(), order.end(), buckets.back()) + 1, sgd_at);
  const ir::Node& step = g.node(sgd[0]);
  const int64_t count = step.attrs.i("count");
  for (int64_t i = 0; i < count; ++i) EXPECT_TRUE(averaged.count(step.inputs[1 + count + i])) << i;
}

TEST(AllreduceGradients, WithoutAnOptimizerTheOutputsAreTheAveragedGradients) {
  const runtime::CompiledGraph c = compiled(2, int64_t{25} << 20, false);
  const std::vector<int> buckets = nodes_of(c.graph, "allreduce_mean");
  ASSERT_EQ(buckets.size(), 1u);
  const std::vector<int>& averaged = c.graph.node(buckets[0]).outputs;
  for (int out : averaged)
    EXPECT_NE(std::find(c.graph.outputs().begin(), c.graph.outputs().end(), out), c.graph.outputs().end());
}

TEST(AllreduceGradients, APlanForTwoRanksRefusesToRunWithoutAWorld) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cpu_ref";
  opt.world_size = 2;
  const std::string e = test_support::error_of(
      [&] { runtime::Executable::compile(frontend::build_model("fmnist_cnn", {.batch = 2}), opt); });
  EXPECT_NE(e.find("averages over 2 ranks, but this executable has no distributed world"), std::string::npos) << e;
}
