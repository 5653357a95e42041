// A first layer on the GPU with trident's own kernels — its convolution and statistics in one
// pass (device/small_channel_conv.cu) and its batchnorm backward and weight gradient in one
// more (cbr_weight_backward, fuse_cbr_weight_backward) — trains as the same network on cuDNN's
// convolutions with the unfused backward, within the dtype's row: every parameter, momentum and
// running statistic after a step, as the relative L2 error of each tensor. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "frontend/builder.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"
#include "support/graph_queries.h"
#include "support/tolerance.h"

namespace trident {
namespace {

// VGG's first layer (the image padded to 4 channels, 64 out), then a narrower cbr and a classifier.
ir::Graph first_layer_network() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {8, 24, 24, 3});
  x = b.cbr(x, 64, 3, 1, 1, "first");
  x = b.maxpool(b.cbr(x, 32, 3, 1, 1, "second"), 2, 2, 0, "pool");
  g.mark_output(b.linear(b.flatten(x, "flat"), 10, true, "fc"));
  return g;
}

passes::CompileOptions options(DType precision, bool fused) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  if (!fused) opt.disabled_passes.push_back("fuse_cbr_weight_backward");
  return opt;
}

int one_pass_backwards(const passes::CompileOptions& given) {
  ir::Graph g = first_layer_network();
  const passes::CompileOptions opt = runtime::with_backend_traits(given);
  passes::PassContext ctx(opt);
  passes::standard_pipeline(opt.mode, opt).run(g, ctx);
  return test_support::count_op(g, "cbr_weight_backward");
}

// ‖a − b‖ / ‖b‖ of two f32 tensors given as bytes.
double relative_error(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  double err = 0, norm = 0;
  for (size_t i = 0; i + 4 <= a.size() && i + 4 <= b.size(); i += 4) {
    float x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    err += (static_cast<double>(x) - y) * (static_cast<double>(x) - y);
    norm += static_cast<double>(y) * y;
  }
  return std::sqrt(err) / std::max(std::sqrt(norm), 1e-30);
}

class GpuFirstLayer : public ::testing::TestWithParam<DType> {};

TEST_P(GpuFirstLayer, OwnKernelsTrainAsCuDnnAndTheUnfusedBackward) {
  TRIDENT_REQUIRE_GPU();
  const DType dt = GetParam();
  ASSERT_EQ(one_pass_backwards(options(dt, true)), 1);
  ASSERT_EQ(one_pass_backwards(options(dt, false)), 0);
  const auto own = test_support::train_deterministic_on_gpu(first_layer_network(), options(dt, true), 1, 10);
  const auto library = test_support::train_deterministic_on_gpu(first_layer_network(), options(dt, false), 1, 10,
                                                                BackendOptions{.small_channel_conv = false});
  ASSERT_EQ(own.size(), library.size());
  ASSERT_GT(own.size(), 10u);
  // The first layer's weight gradient differs in its rounding, so some tensors differ in bits.
  EXPECT_GT(test_support::differing_tensors(own, library), 0);
  const double tol = test_support::tolerance(dt).rtol;
  for (size_t i = 0; i < own.size(); ++i) {
    ASSERT_EQ(own[i].size(), library[i].size()) << "tensor " << i;
    EXPECT_LE(relative_error(own[i], library[i]), tol) << "tensor " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuFirstLayer, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
