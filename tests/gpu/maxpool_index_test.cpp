// The window index on the cuda backend (passes/save_maxpool_index.cpp): a network of
// overlapping, padded, ceil_mode and tiling max poolings trains to the same bits with the
// index as without it, in fp32, fp16 and bf16 (the index names the cell the backward's own
// argmax would find, and the gather adds in the same order); and the same poolings applying
// the previous layer's batchnorm themselves (defer_bn_apply's prologue) train as the layers
// that write their output; and the batchnorm backwards routing the poolings' gradients
// themselves (fold_maxpool_gradient) train as the full-size gradients written and read back.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "frontend/builder.h"
#include "passes/pass.h"
#include "runtime/executable.h"
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
// `routed`: whether the batchnorm backwards route the poolings' gradients themselves
// (fold_maxpool_gradient) instead of reading what maxpool2d_index_backward writes.
passes::CompileOptions options(DType precision, bool index, bool prologue, bool routed) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  opt.maxpool_window_index = index ? 1 : 0;
  opt.bn_apply_prologue = prologue ? 1 : 0;
  if (!routed) opt.disabled_passes.push_back("fold_maxpool_gradient");
  return opt;
}

std::vector<std::vector<std::byte>> train(DType precision, bool index, bool prologue = false) {
  return test_support::train_deterministic_on_gpu(pooling_network(), options(precision, index, prologue, false), 3, 10);
}

// Poolings whose windows tile their input, the ones fold_maxpool_gradient routes: 2×2 on an
// even and an odd size (the last row and column in no window), 3×3 with ceil_mode overhanging
// the edge; channels that split into 16-byte vectors (16, 24) and that do not (6: the scalar
// path).
ir::Graph tiling_network() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {16, 30, 30, 3});
  x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "stem"), 2, 2, 0, "even_pool");  // 30 → 15
  x = b.maxpool(b.cbr(x, 24, 3, 1, 1, "mid"), 2, 2, 0, "odd_pool");    // 15 → 7
  x = b.cbr(x, 6, 3, 1, 1, "narrow");
  x = g.add_node1("maxpool2d", {x},
                  {{"kernel", Shape{3, 3}}, {"stride", Shape{3, 3}}, {"padding", Shape{0, 0}}, {"ceil_mode", int64_t{1}}},
                  "ceil_pool");  // 7 → 3
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

std::vector<std::vector<std::byte>> train_tiling(const passes::CompileOptions& opt) {
  return test_support::train_deterministic_on_gpu(tiling_network(), opt, 3, 10);
}

// Batchnorm backwards that route a pooled gradient in the compiled training graph.
int routing_backwards(const passes::CompileOptions& given) {
  ir::Graph g = tiling_network();
  const passes::CompileOptions opt = runtime::with_backend_traits(given);
  passes::PassContext ctx(opt);
  passes::standard_pipeline(opt.mode, opt).run(g, ctx);
  int n = 0;
  for (int id : g.order()) n += g.node(id).op == "batchnorm_relu_backward" && g.node(id).attrs.i("pooled_dy", 0) != 0;
  return n;
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

// The three tiling poolings' gradients routed by the batchnorm backwards of the layers they
// pool (fold_maxpool_gradient), each layer's output written or read through the affine: the
// same bits as the full-size gradients written by maxpool2d_index_backward and read back.
TEST_P(GpuMaxpoolIndex, BackwardsRoutingThePooledGradientTrainToTheSameBitsAsThePoolingBackward) {
  TRIDENT_REQUIRE_GPU();
  for (bool prologue : {false, true}) {
    SCOPED_TRACE(prologue ? "poolings applying the batchnorm" : "layers writing their output");
    ASSERT_EQ(routing_backwards(options(GetParam(), true, prologue, true)), 3);
    ASSERT_EQ(routing_backwards(options(GetParam(), true, prologue, false)), 0);
    const auto routed = train_tiling(options(GetParam(), true, prologue, true));
    const auto plain = train_tiling(options(GetParam(), true, prologue, false));
    ASSERT_GT(routed.size(), 10u);
    EXPECT_EQ(test_support::differing_tensors(routed, plain), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuMaxpoolIndex, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
