// allreduce_gradients: structural (one node per bucket, the last layer's gradients first, every
// gradient exactly once, each bucket right after its last gradient's producer, one wait before
// sgd_update, which reads the waited values), negative (a single process plans no collective,
// a world of one rank plans the same as two), and the kernel's refusals where the plan and the
// world disagree. The
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

// world_size 0: a single process, no distributed world.
runtime::CompiledGraph compiled(int world_size, int64_t bucket_bytes, bool optimizer = true) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cpu_ref";
  opt.distributed = world_size > 0;
  opt.world_size = std::max(world_size, 1);
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
  const runtime::CompiledGraph c = compiled(0, 25 << 20);
  EXPECT_EQ(count_op(c.graph, "allreduce_mean"), 0);
  EXPECT_EQ(count_op(c.graph, "allreduce_wait"), 0);
}

TEST(AllreduceGradients, AWorldOfOneRankPlansTheCollectivesOfALargerOne) {
  const runtime::CompiledGraph one = compiled(1, 16 << 10), two = compiled(2, 16 << 10);
  EXPECT_GT(count_op(one.graph, "allreduce_mean"), 4);
  EXPECT_EQ(count_op(one.graph, "allreduce_mean"), count_op(two.graph, "allreduce_mean"));
  EXPECT_EQ(count_op(one.graph, "allreduce_wait"), 1);
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
  // Each bucket runs right after the last producer of its gradients (so it overlaps the rest of
  // the backward), one wait over all of them right before the optimizer, which reads only
  // waited gradients.
  const auto& order = g.order();
  auto at = [&](int node) { return std::find(order.begin(), order.end(), node) - order.begin(); };
  for (int b : buckets) {
    ptrdiff_t last = -1;
    for (int v : g.node(b).inputs) last = std::max(last, at(g.value(v).producer));
    EXPECT_EQ(at(b), last + 1) << g.node(b).name;
  }
  EXPECT_LT(at(buckets.front()), at(buckets.back()));
  EXPECT_LT(at(buckets.back()), at(sgd[0]));
  const std::vector<int> wait = nodes_of(g, "allreduce_wait");
  ASSERT_EQ(wait.size(), 1u);
  EXPECT_EQ(at(wait[0]) + 1, at(sgd[0]));
  EXPECT_EQ(std::set<int>(g.node(wait[0]).inputs.begin(), g.node(wait[0]).inputs.end()), averaged);
  const std::set<int> waited(g.node(wait[0]).outputs.begin(), g.node(wait[0]).outputs.end());
  const ir::Node& step = g.node(sgd[0]);
  const int64_t count = step.attrs.i("count");
  for (int64_t i = 0; i < count; ++i) EXPECT_TRUE(waited.count(step.inputs[1 + count + i])) << i;
}

TEST(AllreduceGradients, WithoutAnOptimizerTheOutputsAreTheAveragedGradients) {
  const runtime::CompiledGraph c = compiled(2, int64_t{25} << 20, false);
  ASSERT_EQ(nodes_of(c.graph, "allreduce_mean").size(), 1u);
  const std::vector<int> wait = nodes_of(c.graph, "allreduce_wait");
  ASSERT_EQ(wait.size(), 1u);
  for (int out : c.graph.node(wait[0]).outputs)
    EXPECT_NE(std::find(c.graph.outputs().begin(), c.graph.outputs().end(), out), c.graph.outputs().end());
}

TEST(AllreduceGradients, APlanForTwoRanksRefusesToRunWithoutAWorld) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cpu_ref";
  opt.distributed = true;
  opt.world_size = 2;
  const std::string e = test_support::error_of(
      [&] { runtime::Executable::compile(frontend::build_model("fmnist_cnn", {.batch = 2}), opt); });
  EXPECT_NE(e.find("averages over 2 ranks, but this executable has no distributed world"), std::string::npos) << e;
}

// Mixed precision: the gradients' cast to f32 is one cast_group at the end of the backward
// unless each bucket takes its own, right after the wgrads that make them; without that the
// first bucket could not start before the last gradient exists.
TEST(AllreduceGradients, UnderMixedPrecisionEachBucketCastsItsOwnGradientsAsSoonAsTheyExist) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cuda";  // compiled only: the passes need no GPU
  opt.precision = DType::f16;
  opt.distributed = true;
  opt.world_size = 2;
  opt.allreduce_bucket_bytes = 64 << 10;
  const runtime::CompiledGraph c = runtime::compile_graph(frontend::build_model("resnet_cifar", {.batch = 2}), opt);
  const ir::Graph& g = c.graph;
  const std::vector<int> buckets = nodes_of(g, "allreduce_mean");
  ASSERT_GT(buckets.size(), 4u);
  const auto& order = g.order();
  auto at = [&](int node) { return std::find(order.begin(), order.end(), node) - order.begin(); };
  std::set<int> casts;
  for (int b : buckets) {
    for (int v : g.node(b).inputs) {
      const ir::Node& producer = g.node(g.value(v).producer);
      if (producer.op != "cast_group") continue;
      casts.insert(producer.id);
      // The cast holds only this bucket's gradients.
      for (int out : producer.outputs)
        EXPECT_NE(std::find(g.node(b).inputs.begin(), g.node(b).inputs.end(), out), g.node(b).inputs.end());
    }
  }
  EXPECT_GE(casts.size(), buckets.size() - 1);
  // The first bucket starts while weight gradients are still being computed.
  const std::vector<int> wgrads = nodes_of(g, "conv2d_backward_weight");
  ASSERT_FALSE(wgrads.empty());
  EXPECT_LT(at(buckets.front()), at(wgrads.back()));
  for (auto [p, gp] : c.param_grads) EXPECT_EQ(g.value(gp).dtype, DType::f32) << g.value(p).name;
}
