// The window index on the cuda backend (passes/save_maxpool_index.cpp): a network of
// overlapping, padded, ceil_mode and tiling max poolings trains to the same bits with the
// index as without it, in fp32, fp16 and bf16 (the index names the cell the backward's own
// argmax would find, and the gather adds in the same order); and the same poolings applying
// the previous layer's batchnorm themselves (defer_bn_apply's prologue) train as the layers
// that write their output. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "frontend/builder.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"

namespace trident {
namespace {

ir::Graph pooling_network() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {16, 29, 29, 3});
  x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "stem"), 3, 2, 1, "stem_pool");  // 29 → 15
  x = b.cbr(x, 32, 3, 1, 1, "mid");
  x = g.add_node1("maxpool2d", {x},
                  {{"kernel", Shape{3, 3}}, {"stride", Shape{2, 2}}, {"padding", Shape{0, 0}}, {"ceil_mode", int64_t{1}}},
                  "ceil_pool");  // 15 → 7
  x = b.maxpool(b.cbr(x, 24, 3, 1, 1, "odd"), 3, 1, 1, "dense_pool");  // 24 channels: 8-wide vectors in f16 only
  x = b.maxpool(b.cbr(x, 32, 1, 1, 1, "last"), 3, 3, 0, "tile_pool");  // 9 → 3, windows that tile
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

// `prologue`: whether the poolings apply the previous layer's batchnorm themselves
// (defer_bn_apply, which needs the index); without it every cbr writes its output as before.
std::vector<std::vector<std::byte>> train(DType precision, bool index, bool prologue = false) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  opt.maxpool_window_index = index ? 1 : 0;
  opt.bn_apply_prologue = prologue ? 1 : 0;
  return test_support::train_deterministic_on_gpu(pooling_network(), opt, 3, 10);
}

class GpuMaxpoolIndex : public ::testing::TestWithParam<DType> {};

TEST_P(GpuMaxpoolIndex, TrainsToTheSameBitsAsTheBackwardThatReadsTheInput) {
  TRIDENT_REQUIRE_GPU();
  const auto indexed = train(GetParam(), true);
  const auto plain = train(GetParam(), false);
  ASSERT_GT(indexed.size(), 10u);
  EXPECT_EQ(test_support::differing_tensors(indexed, plain), 0);
}

// The poolings reading the raw convolution outputs through the affine train to the same bits
// as the cbr layers writing their outputs, in every precision: the pooling's affine stays f32
// (attribute exact_affine), as the cbr's apply reads it.
TEST_P(GpuMaxpoolIndex, PoolingsThatApplyTheBatchnormTrainToTheSameBitsAsTheLayersThatWriteTheirOutput) {
  TRIDENT_REQUIRE_GPU();
  const auto fused = train(GetParam(), true, true);
  const auto plain = train(GetParam(), true, false);
  ASSERT_GT(fused.size(), 10u);
  EXPECT_EQ(test_support::differing_tensors(fused, plain), 0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuMaxpoolIndex, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
