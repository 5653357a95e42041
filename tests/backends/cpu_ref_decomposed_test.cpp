// cpu_ref runs a fused op as its OpDef::decompose (backends/cpu_ref/decomposed.cpp): it says
// which nodes it runs, and an output that shares its buffer with an input (a residual the
// plan reuses for the result) comes out as if the buffers were apart.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

TEST(CpuRefDecomposed, SaysWhichNodesItRuns) {
  ir::Graph g;
  const int x = g.add_input("x", {2, 5, 5, 3}), w = g.add_parameter("w", {4, 3, 3, 3}, {});
  const int gamma = g.add_parameter("gamma", {4}, {}), beta = g.add_parameter("beta", {4}, {});
  const int mean = g.add_state("mean", {4}, {}), var = g.add_state("var", {4}, {});
  const ir::Attrs pad{{"padding", std::vector<int64_t>{1, 1}}};
  const int y = g.add_node1("cbr", {x, w, gamma, beta, mean, var}, pad, "layer");
  const ir::Node& node = g.node(g.value(y).producer);
  EXPECT_EQ(KernelRegistry::make("cpu_ref", node, g)->implementation(), "decomposition: conv2d, batchnorm2d, relu");
}

TEST(CpuRefDecomposed, AnOutputSharingTheResidualsBufferMatchesSeparateBuffers) {
  ir::Graph g;
  const int x = g.add_input("x", {2, 4, 4, 3}, DType::f64), w = g.add_parameter("w", {3, 3, 3, 3}, {}, DType::f64);
  const int r = g.add_input("r", {2, 4, 4, 3}, DType::f64);
  const ir::Attrs a{{"padding", std::vector<int64_t>{1, 1}}, {"residual", int64_t{1}}, {"relu", int64_t{1}}};
  const int y = g.add_node1("conv2d_epilogue", {x, w, r}, a, "block");
  const ir::Node& node = g.node(g.value(y).producer);

  std::mt19937 rng(7);
  HostTensor xt = random_tensor({2, 4, 4, 3}, rng), wt = random_tensor({3, 3, 3, 3}, rng);
  HostTensor rt = random_tensor({2, 4, 4, 3}, rng), apart({2, 4, 4, 3}, DType::f64);
  HostTensor shared = rt.as(DType::f64);  // the result overwrites the residual
  auto kernel = KernelRegistry::make("cpu_ref", node, g);
  kernel->run({node, {xt.view(), wt.view(), rt.view()}, {apart.view()}});
  kernel->run({node, {xt.view(), wt.view(), shared.view()}, {shared.view()}});
  expect_close(shared, apart, 0, 0, "in place");

  HostTensor conv({2, 4, 4, 3}, DType::f64);
  run_op("conv2d", {{"padding", std::vector<int64_t>{1, 1}}}, {&xt, &wt}, {&conv});
  std::vector<double> want = conv.values();
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + rt.get(static_cast<int64_t>(i)));
  expect_values(apart, want, 0, "conv + residual, relu");
}

}  // namespace
}  // namespace trident::testing
