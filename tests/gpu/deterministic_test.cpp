// BackendOptions::deterministic on the cuda backend: two executables compiled apart (plans
// chosen again, buffers elsewhere) train a ResNet for a few steps, replayed as CUDA graphs, to
// the same bits in fp32, fp16 and bf16: every parameter, momentum and running statistic.
// Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "frontend/zoo.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"

namespace trident {
namespace {

std::vector<std::vector<std::byte>> train_deterministic(DType precision) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  return test_support::train_deterministic_on_gpu(frontend::build_model("resnet_cifar", {.batch = 16}), opt, 4, 10);
}

class GpuDeterministic : public ::testing::TestWithParam<DType> {};

TEST_P(GpuDeterministic, TwoExecutablesTrainToTheSameBits) {
  TRIDENT_REQUIRE_GPU();
  const auto first = train_deterministic(GetParam());
  const auto second = train_deterministic(GetParam());
  ASSERT_EQ(first.size(), second.size());
  ASSERT_GT(first.size(), 10u);
  const int differing = test_support::differing_tensors(first, second);
  EXPECT_EQ(differing, 0) << differing << " of " << first.size() << " tensors differ between the two runs";
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuDeterministic, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
