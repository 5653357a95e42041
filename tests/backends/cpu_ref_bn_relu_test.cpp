// cpu_ref bn_relu: its backward rule (one batchnorm_relu_backward) against central
// differences in f64, for x, gamma and beta, with the y mask and with the packed relu mask;
// points within ε of the relu's kink are skipped. cpu_ref runs both nodes as their
// decompositions, so this checks the rule, not a kernel of its own.
#include "backends/gradcheck.h"
#include "ir/op_registry.h"
#include "ops/bn_relu_operands.h"
#include "support/graph_runner.h"

namespace trident::testing {
namespace {

using test_support::GraphRunner;

struct BnReluGraph {
  ir::Graph g;
  int x = -1, gamma = -1, beta = -1, seed = -1;  // seed: the weights G of L = Σ G·y
  std::vector<int> outputs, grads;               // the forward's outputs; dx, dgamma, dbeta
};

BnReluGraph bn_relu_with_backward(const Shape& s, bool packed) {
  BnReluGraph b;
  const Shape c{s[3]};
  b.x = b.g.add_input("x", s, DType::f64);
  b.gamma = b.g.add_input("gamma", c, DType::f64);
  b.beta = b.g.add_input("beta", c, DType::f64);
  const int mean = b.g.add_input("running_mean", c, DType::f64), var = b.g.add_input("running_var", c, DType::f64);
  b.seed = b.g.add_input("seed", s, DType::f64);
  ir::Attrs a{{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{1}}};
  if (packed) a.set("relu_mask", int64_t{1});
  b.outputs = b.g.add_node("bn_relu", {b.x, b.gamma, b.beta, mean, var}, a, "bnr");
  const ir::Node node = b.g.node(b.g.value(b.outputs[0]).producer);
  std::vector<int> dys(node.outputs.size(), -1);
  dys[ops::bn_relu_out::y] = b.seed;
  const std::vector<int> grads = ir::OpRegistry::get("bn_relu").backward(b.g, node, dys);
  b.grads = {grads[ops::bn_relu_in::x], grads[ops::bn_relu_in::gamma], grads[ops::bn_relu_in::beta]};
  return b;
}

void write(GraphRunner& r, int v, const HostTensor& t) {
  TensorView view = r.view(v);
  for (int64_t i = 0; i < t.numel(); ++i) view.as<double>()[i] = t.get(i);
}

HostTensor read(GraphRunner& r, int v, const Shape& shape) {
  HostTensor t(shape, DType::f64);
  const std::vector<double> values = r.values(v);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<size_t>(i)]);
  return t;
}

class BnReluGradient : public ::testing::TestWithParam<bool> {};

TEST_P(BnReluGradient, MatchesCentralDifferences) {
  const bool packed = GetParam();
  const Shape s{3, 4, 3, 8};
  BnReluGraph b = bn_relu_with_backward(s, packed);
  ASSERT_EQ(b.g.node(b.g.value(b.grads[0]).producer).op, "batchnorm_relu_backward");
  std::mt19937 rng(7);
  HostTensor x = random_tensor(s, rng, -2, 3), gamma = random_tensor({8}, rng, 0.5, 1.5);
  HostTensor beta = random_tensor({8}, rng, -0.5, 0.5), seed = random_tensor(s, rng);
  HostTensor mean({8}, DType::f64), var = HostTensor::of({8}, std::vector<double>(8, 1.0));
  GraphRunner runner(b.g, "cpu_ref");
  auto run = [&] {
    write(runner, b.x, x);
    write(runner, b.gamma, gamma);
    write(runner, b.beta, beta);
    write(runner, b.seed, seed);
    write(runner, b.g.find_value("running_mean"), mean);  // updated in place: reset every run
    write(runner, b.g.find_value("running_var"), var);
    runner.run();
  };
  run();
  const HostTensor dx = read(runner, b.grads[0], s), dgamma = read(runner, b.grads[1], {8}),
                   dbeta = read(runner, b.grads[2], {8});
  // The normalised value before the relu, from the saved statistics: its kink is at 0.
  const HostTensor saved_mean = read(runner, b.outputs[ops::bn_relu_out::saved_mean], {8});
  const HostTensor saved_invstd = read(runner, b.outputs[ops::bn_relu_out::saved_invstd], {8});
  auto pre_relu = [&](int64_t i) {
    const int64_t c = i % 8;
    return (x.get(i) - saved_mean.get(c)) * saved_invstd.get(c) * gamma.get(c) + beta.get(c);
  };
  GradCheckOptions opt;
  opt.atol = 1e-6;
  opt.rtol = 1e-5;
  opt.skip = [&](int64_t i, double) { return std::abs(pre_relu(i)) < 1e-4; };
  auto loss = [&] {
    run();
    return weighted_sum(seed, read(runner, b.outputs[ops::bn_relu_out::y], s));
  };
  EXPECT_GT(expect_gradient(x, dx, loss, "dx", opt), s[0] * s[1] * s[2] * s[3] / 2);
  GradCheckOptions all = opt;
  all.skip = nullptr;
  EXPECT_EQ(expect_gradient(gamma, dgamma, loss, "dgamma", all), 8);
  EXPECT_EQ(expect_gradient(beta, dbeta, loss, "dbeta", all), 8);
}

INSTANTIATE_TEST_SUITE_P(Masks, BnReluGradient, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PackedMask" : "OutputAsMask"; });

}  // namespace
}  // namespace trident::testing
