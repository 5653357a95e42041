// The cuda bn_relu kernel (channel sums, cbr's finalize, the apply with relu and mask; in
// inference the batchnorm inference kernel and a relu) against its decomposition on cpu_ref
// (batchnorm2d → relu): y, the saved statistics and the running statistics updated in place,
// in f32 and f16, on channel counts that fill 16-byte vectors and one that does not; the
// packed mask agrees bit for bit with the kernel's own y; a whole pre-activation training
// step with fuse_bn_relu on and off gives the same loss and gradients. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/relu_mask.h"
#include "frontend/builder.h"
#include "ir/graph.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"

namespace trident {
namespace {

using test_support::compare_with_cpu_ref;
using test_support::GraphRunner;

ir::Graph bn_relu_graph(const Shape& s, DType dt, bool training, bool packed = false) {
  ir::Graph g;
  const Shape c{s[3]};
  std::vector<int> in{g.add_input("x", s, dt), g.add_parameter("gamma", c, {}, DType::f32),
                      g.add_parameter("beta", c, {}, DType::f32), g.add_state("running_mean", c, {}, DType::f32),
                      g.add_state("running_var", c, {}, DType::f32)};
  ir::Attrs a{{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{training}}};
  if (packed) a.set("relu_mask", int64_t{1});
  g.add_node("bn_relu", in, a, "bnr");
  return g;
}

const Shape kShapes[] = {{4, 8, 8, 16}, {8, 16, 16, 64}, {2, 5, 5, 17}};

class GpuBnRelu : public ::testing::TestWithParam<DType> {};

TEST_P(GpuBnRelu, TrainingMatchesDecompositionOnCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const DType dt = GetParam();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(shape_str(s));
    compare_with_cpu_ref(bn_relu_graph(s, dt, true), bn_relu_graph(s, DType::f32, true),
                         {"bnr.y", "bnr.saved_mean", "bnr.saved_invstd", "running_mean", "running_var"}, dt, 61);
  }
}

TEST_P(GpuBnRelu, InferenceMatchesDecompositionOnCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const DType dt = GetParam();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(shape_str(s));
    compare_with_cpu_ref(bn_relu_graph(s, dt, false), bn_relu_graph(s, DType::f32, false), {"bnr"}, dt, 62);
  }
}

TEST_P(GpuBnRelu, PackedMaskIsTheKernelsOwnOutputAboveZero) {
  TRIDENT_REQUIRE_GPU();
  const DType dt = GetParam();
  const Shape s{4, 8, 8, 16};
  const ir::Graph g = bn_relu_graph(s, dt, true, true);
  compare_with_cpu_ref(g, bn_relu_graph(s, DType::f32, true), {"bnr.y", "bnr.saved_mean", "bnr.saved_invstd"}, dt, 63);
  GraphRunner r(g, "cuda");
  r.randomize(63);
  r.run();
  const std::vector<double> y = r.values(g.find_value("bnr.y"));
  const TensorView mask = r.view(g.find_value("bnr.relu_mask"));
  const int64_t words = relu_mask_words(s[3]);
  int wrong = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / s[3], c = static_cast<int64_t>(i) % s[3];
    const uint32_t word = mask.as<uint32_t>()[row * words + c / 32];
    wrong += ((word >> (c % 32)) & 1u) != (y[i] > 0 ? 1u : 0u);
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuBnRelu, ::testing::Values(DType::f32, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A pre-activation block: stem, bn → relu → conv, bn → relu → conv, the sum, a plain bn → relu.
ir::Graph preact_network() {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {8, 8, 8, 3});
  const int stem = b.cbr(x, 16, 3, 1, 1, "stem");
  const int c1 = b.conv(b.relu(b.batchnorm(stem, "bn1"), "relu1"), 16, 1, 1, 0, {}, "conv1");
  const int c2 = b.conv(b.relu(b.batchnorm(c1, "bn2"), "relu2"), 16, 3, 1, 1, {}, "conv2");
  const int out = b.relu(b.batchnorm(b.add(c2, stem, "add"), "bn_out"), "relu_out");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(out)), 5, true, "fc"));
  return g;
}

TEST(GpuBnReluNetwork, FusedStepMatchesUnfusedStep) {
  TRIDENT_REQUIRE_GPU();
  passes::CompileOptions on;
  on.mode = passes::Mode::Train;
  on.backend = "cuda";
  on.optimizer = false;
  on.bn_relu_fusion = 1;
  passes::CompileOptions off = on;
  off.disabled_passes = {"fuse_bn_relu"};
  const ir::Graph model = preact_network();
  auto fused = runtime::Executable::compile(model, on);
  auto plain = runtime::Executable::compile(model, off);
  ASSERT_EQ(test_support::count_op(fused->graph(), "bn_relu"), 2);
  for (auto* exe : {fused.get(), plain.get()}) {
    exe->init_parameters(3);
    Rng r(4);
    TensorView img = exe->host_view(exe->graph().find_value("images"));
    for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(r.uniform(-1, 1));
    TensorView lab = exe->host_view(exe->graph().find_value("labels"));
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
    exe->upload(exe->graph().find_value("images"));
    exe->upload(exe->graph().find_value("labels"));
    exe->run();
  }
  auto values = [](runtime::Executable& exe, int v) {
    exe.download(v);
    const TensorView t = exe.host_view(v);
    return std::vector<double>(t.as<float>(), t.as<float>() + t.numel());
  };
  test_support::expect_close_scaled(values(*fused, fused->loss()), values(*plain, plain->loss()), DType::f32, "loss");
  for (const auto& [param, grad] : plain->param_grads()) {
    const std::string& name = plain->graph().value(param).name;
    for (const auto& [p, fgrad] : fused->param_grads())
      if (fused->graph().value(p).name == name)
        test_support::expect_close_norm(values(*fused, fgrad), values(*plain, grad), DType::f32, "gradient of " + name);
  }
}

}  // namespace
}  // namespace trident
