// The optimizer reading the f16/bf16 weight gradients itself on the cuda backend
// (passes/fold_gradient_cast.cpp): mixed-precision training of a ResNet trains to the same bits
// as with the gradients' f32 copies written by their cast group and read back, with SGD and
// AdamW, and with f16's dynamic loss scaling (the overflow check reads the narrow gradients).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "frontend/zoo.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"

namespace trident {
namespace {

std::vector<std::vector<std::byte>> train(DType precision, passes::OptimizerKind kind, bool fold) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  opt.optimizer_kind = kind;
  if (!fold) opt.disabled_passes.push_back("fold_gradient_cast");
  return test_support::train_deterministic_on_gpu(frontend::build_model("resnet_cifar", {.batch = 8}), opt, 3, 10);
}

class GpuGradientCast : public ::testing::TestWithParam<DType> {};

TEST_P(GpuGradientCast, TheOptimizerOnNarrowGradientsTrainsToTheSameBitsAsOnTheirF32Copies) {
  TRIDENT_REQUIRE_GPU();
  for (auto kind : {passes::OptimizerKind::Sgd, passes::OptimizerKind::AdamW}) {
    SCOPED_TRACE(std::string(passes::optimizer_kind_name(kind)));
    const auto folded = train(GetParam(), kind, true);
    const auto plain = train(GetParam(), kind, false);
    ASSERT_GT(folded.size(), 10u);
    EXPECT_EQ(test_support::differing_tensors(folded, plain), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuGradientCast, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
