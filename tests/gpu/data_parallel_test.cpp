// Data parallel on the cuda backend, on one GPU: a world of one rank (test_support::OneRankWorld,
// no launcher needed) plans the collectives of any world — buckets of gradients all-reduced by
// NCCL on the collective stream while the backward goes on, waited for before the optimizer,
// inside the step's CUDA graph — and averaging over one rank is the identity, so the training
// must reach the bits of the same training without a world, in fp32, fp16 and bf16. Two or more
// ranks need a GPU each (NCCL refuses two ranks on one device): that equivalence is
// runtime/distributed/data_parallel_mpi.cpp's under mpirun. Skipped, with the reason, without a
// GPU or without NCCL's library.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "frontend/zoo.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"
#include "support/graph_queries.h"
#include "support/one_rank_world.h"

namespace trident {
namespace {

passes::CompileOptions train_options(DType precision, bool distributed) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  opt.distributed = distributed;
  opt.world_size = 1;
  opt.allreduce_bucket_bytes = 64 << 10;  // ResNet-20's 1 MiB of gradients in many buckets
  return opt;
}

class GpuDataParallel : public ::testing::TestWithParam<DType> {};

TEST_P(GpuDataParallel, OneRankOfNcclTrainsTheBitsOfASingleProcess) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {.batch = 16});
  const runtime::CompiledGraph planned = runtime::compile_graph(model, train_options(GetParam(), true));
  ASSERT_GT(test_support::count_op(planned.graph, "allreduce_mean"), 4);
  ASSERT_EQ(test_support::count_op(planned.graph, "allreduce_wait"), 1);

  BackendOptions with_world;
  with_world.world = std::make_shared<test_support::OneRankWorld>();
  std::vector<std::vector<std::byte>> ranked;
  try {
    ranked = test_support::train_deterministic_on_gpu(model, train_options(GetParam(), true), 4, 10, with_world);
  } catch (const Error& e) {
    if (test_support::nccl_missing(e)) GTEST_SKIP() << "NCCL is not installed here: " << e.what();
    throw;
  }
  const auto alone = test_support::train_deterministic_on_gpu(model, train_options(GetParam(), false), 4, 10);
  ASSERT_EQ(ranked.size(), alone.size());
  ASSERT_GT(ranked.size(), 10u);
  const int differing = test_support::differing_tensors(ranked, alone);
  EXPECT_EQ(differing, 0) << differing << " of " << ranked.size() << " tensors differ from the single-process run";
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuDataParallel, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
