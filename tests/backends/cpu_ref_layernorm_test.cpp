// layernorm and the GELU activations on the reference backend: known values, and every
// backward (dx, dgamma, dbeta; GELU's dx, exact and tanh forms) against central differences in f64.
#include <cmath>

#include "backends/gradcheck.h"

using namespace trident;
using namespace trident::testing;

TEST(CpuRefLayerNorm, NormalisesEachRowOverTheLastAxis) {
  HostTensor x = HostTensor::of({2, 1, 1, 4}, {1, 2, 3, 4, 10, 10, 10, 10});
  HostTensor gamma = HostTensor::of({4}, {1, 1, 2, 1}), beta = HostTensor::of({4}, {0, 0, 0, 1});
  HostTensor y({2, 1, 1, 4}, DType::f64);
  run_op("layernorm", {{"eps", 1e-12}}, {&x, &gamma, &beta}, {&y});
  const double s = 1 / std::sqrt(1.25);  // the first row's deviation: var = 1.25
  expect_values(y, {-1.5 * s, -0.5 * s, 2 * 0.5 * s, 1.5 * s + 1, 0, 0, 0, 1}, 1e-9);
}

TEST(CpuRefLayerNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  const Shape s{3, 2, 2, 7};
  HostTensor x = random_tensor(s, rng), g = random_tensor(s, rng);
  HostTensor gamma = random_tensor({7}, rng, 0.5, 1.5), beta = random_tensor({7}, rng);
  const ir::Attrs a{{"eps", 1e-5}};
  auto loss = [&] {
    HostTensor y(s, DType::f64);
    run_op("layernorm", a, {&x, &gamma, &beta}, {&y});
    return weighted_sum(g, y);
  };
  HostTensor dx(s, DType::f64), dgamma({7}, DType::f64), dbeta({7}, DType::f64);
  run_op("layernorm_backward", a, {&x, &g, &gamma}, {&dx, &dgamma, &dbeta});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
  EXPECT_EQ(expect_gradient(gamma, dgamma, loss, "dgamma"), gamma.numel());
  EXPECT_EQ(expect_gradient(beta, dbeta, loss, "dbeta"), beta.numel());
}

TEST(CpuRefGelu, ExactAndTanhFormsAtKnownPoints) {
  HostTensor x = HostTensor::of({3}, {-1, 0, 2});
  HostTensor y({3}, DType::f64);
  run_op("activation", {{"fn", std::string("gelu")}}, {&x}, {&y});
  expect_values(y, {-0.15865525393145707, 0, 1.9544997361036416}, 1e-12);
  run_op("activation", {{"fn", std::string("gelu_tanh")}}, {&x}, {&y});
  expect_values(y, {-0.15880800939172324, 0, 1.954597694087775}, 1e-12);
}

TEST(CpuRefGelu, BackwardMatchesFiniteDifferences) {
  for (const std::string fn : {"gelu", "gelu_tanh"}) {
    std::mt19937 rng(7);
    const Shape s{2, 3, 3, 4};
    HostTensor x = random_tensor(s, rng, -3, 3), g = random_tensor(s, rng);
    const ir::Attrs a{{"fn", fn}};
    auto loss = [&] {
      HostTensor y(s, DType::f64);
      run_op("activation", a, {&x}, {&y});
      return weighted_sum(g, y);
    };
    HostTensor dx(s, DType::f64);
    run_op("activation_backward", a, {&x, &g}, {&dx});
    EXPECT_EQ(expect_gradient(x, dx, loss, fn), x.numel()) << fn;
  }
}
