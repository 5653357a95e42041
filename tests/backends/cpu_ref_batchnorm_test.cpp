// cpu_ref batchnorm2d: training statistics and running-stat update on hand-computed numbers,
// inference mode, gradient check of batchnorm2d_backward, and f32/f64 agreement.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

Attrs bn_attrs(bool training, double eps, double momentum = 0.1) {
  return Attrs{{"eps", eps}, {"momentum", momentum}, {"training", int64_t{training ? 1 : 0}}};
}

TEST(CpuRefBatchnorm, TrainingOnFourNumbers) {
  HostTensor x = HostTensor::of({4, 1, 1, 1}, {1, 2, 3, 4});
  HostTensor gamma = HostTensor::of({1}, {2}), beta = HostTensor::of({1}, {1});
  HostTensor rm = HostTensor::of({1}, {0}), rv = HostTensor::of({1}, {1});
  HostTensor y({4, 1, 1, 1}, DType::f64), mean({1}, DType::f64), invstd({1}, DType::f64);
  // running statistics are updated in place: the outputs are the input tensors themselves.
  run_op("batchnorm2d", bn_attrs(true, 0.0), {&x, &gamma, &beta, &rm, &rv},
         {&y, &mean, &invstd, &rm, &rv});
  // mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, invstd = 1/sqrt(1.25).
  EXPECT_DOUBLE_EQ(mean.get(0), 2.5);
  EXPECT_NEAR(invstd.get(0), 0.894427190999916, 1e-14);
  // y = (x − 2.5) · 0.894427191 · 2 + 1
  expect_values(y, {-1.683281572999748, 0.105572809000084, 1.894427190999916, 3.683281572999748},
                1e-12);
  // running_mean = 0.9·0 + 0.1·2.5; running_var = 0.9·1 + 0.1·1.25·4/3 (unbiased).
  EXPECT_NEAR(rm.get(0), 0.25, 1e-15);
  EXPECT_NEAR(rv.get(0), 0.9 + 0.1 * 1.25 * 4.0 / 3.0, 1e-15);
  EXPECT_NEAR(rv.get(0), 1.0666666666666667, 1e-12);
}

TEST(CpuRefBatchnorm, ChannelsAreIndependent) {
  // Two samples, two channels: channel 0 = {1, 3}, channel 1 = {0, 4}.
  HostTensor x = HostTensor::of({2, 1, 1, 2}, {1, 0, 3, 4});
  HostTensor gamma = HostTensor::of({2}, {1, 3}), beta = HostTensor::of({2}, {0, -1});
  HostTensor rm = HostTensor::of({2}, {1, 1}), rv = HostTensor::of({2}, {1, 1});
  HostTensor rm_out({2}, DType::f64), rv_out({2}, DType::f64);
  HostTensor y({2, 1, 1, 2}, DType::f64), mean({2}, DType::f64), invstd({2}, DType::f64);
  run_op("batchnorm2d", bn_attrs(true, 0.0, 0.5), {&x, &gamma, &beta, &rm, &rv},
         {&y, &mean, &invstd, &rm_out, &rv_out});
  expect_values(mean, {2, 2}, 0);
  expect_values(invstd, {1, 0.5}, 0);                  // variances 1 and 4
  expect_values(y, {-1, -3 - 1, 1, 3 - 1}, 1e-15);     // xhat = ∓1, times gamma, plus beta
  expect_values(rm_out, {1.5, 1.5}, 0);                // 0.5·1 + 0.5·2
  expect_values(rv_out, {0.5 + 0.5 * 2, 0.5 + 0.5 * 8}, 0);  // unbiased: var·2/1
  expect_values(rm, {1, 1}, 0);                        // inputs untouched when not aliased
}

TEST(CpuRefBatchnorm, InferenceUsesRunningStatistics) {
  HostTensor x = HostTensor::of({4, 1, 1, 1}, {1, 2, 3, 4});
  HostTensor gamma = HostTensor::of({1}, {2}), beta = HostTensor::of({1}, {1});
  HostTensor rm = HostTensor::of({1}, {0.5}), rv = HostTensor::of({1}, {4});
  HostTensor y({4, 1, 1, 1}, DType::f64);
  run_op("batchnorm2d", bn_attrs(false, 0.0), {&x, &gamma, &beta, &rm, &rv}, {&y});
  // (x − 0.5) / 2 · 2 + 1 = x + 0.5
  expect_values(y, {1.5, 2.5, 3.5, 4.5}, 1e-15);
  expect_values(rm, {0.5}, 0);
  expect_values(rv, {4}, 0);
}

TEST(CpuRefBatchnorm, BackwardMatchesCentralDifferences) {
  std::mt19937 rng(99);
  const Shape xs{3, 4, 3, 5};
  HostTensor x = random_tensor(xs, rng, -2, 3);
  HostTensor gamma = random_tensor({5}, rng, 0.5, 1.5), beta = random_tensor({5}, rng);
  HostTensor rm({5}, DType::f64), rv = HostTensor::of({5}, {1, 1, 1, 1, 1});
  HostTensor g = random_tensor(xs, rng);
  const Attrs a = bn_attrs(true, 1e-5);
  HostTensor saved_mean({5}, DType::f64), saved_invstd({5}, DType::f64);
  auto forward = [&](HostTensor& y) {
    HostTensor rm_out({5}, DType::f64), rv_out({5}, DType::f64);
    run_op("batchnorm2d", a, {&x, &gamma, &beta, &rm, &rv},
           {&y, &saved_mean, &saved_invstd, &rm_out, &rv_out});
  };
  auto loss = [&] {
    HostTensor y(xs, DType::f64);
    forward(y);
    return weighted_sum(g, y);
  };
  HostTensor y(xs, DType::f64);
  forward(y);
  HostTensor dx(xs, DType::f64), dgamma({5}, DType::f64), dbeta({5}, DType::f64);
  run_op("batchnorm2d_backward", Attrs{{"eps", 1e-5}}, {&x, &g, &gamma, &saved_mean, &saved_invstd},
         {&dx, &dgamma, &dbeta});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
  expect_gradient(gamma, dgamma, loss, "dgamma");
  expect_gradient(beta, dbeta, loss, "dbeta");
}

TEST(CpuRefBatchnorm, F32MatchesF64) {
  std::mt19937 rng(5);
  const Shape xs{4, 5, 5, 19};  // 19 channels: more than one channel block, and a ragged one
  HostTensor x = random_tensor(xs, rng, -1, 2), g = random_tensor(xs, rng);
  HostTensor gamma = random_tensor({19}, rng), beta = random_tensor({19}, rng);
  HostTensor rm = random_tensor({19}, rng), rv = random_tensor({19}, rng, 0.5, 2);
  std::vector<HostTensor> res[2];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    const DType d = types[t];
    HostTensor xt = x.as(d), gt = g.as(d), gm = gamma.as(d), bt = beta.as(d), rmt = rm.as(d),
               rvt = rv.as(d);
    HostTensor y(xs, d), mean({19}, d), invstd({19}, d), yi(xs, d);
    run_op("batchnorm2d", bn_attrs(false, 1e-5), {&xt, &gm, &bt, &rmt, &rvt}, {&yi});
    run_op("batchnorm2d", bn_attrs(true, 1e-5), {&xt, &gm, &bt, &rmt, &rvt},
           {&y, &mean, &invstd, &rmt, &rvt});
    HostTensor dx(xs, d), dgamma({19}, d), dbeta({19}, d);
    run_op("batchnorm2d_backward", Attrs{{"eps", 1e-5}}, {&xt, &gt, &gm, &mean, &invstd},
           {&dx, &dgamma, &dbeta});
    res[t] = {yi, y, mean, invstd, rmt, rvt, dx, dgamma, dbeta};
  }
  const char* names[] = {"y (inference)", "y", "mean", "invstd", "running_mean", "running_var",
                         "dx", "dgamma", "dbeta"};
  for (size_t i = 0; i < res[0].size(); ++i)
    expect_close(res[1][i], res[0][i], 1e-4, 1e-4, names[i]);
}

TEST(CpuRefBatchnorm, TrainingNeedsMoreThanOneValue) {
  HostTensor x({1, 1, 1, 2}, DType::f64), p({2}, DType::f64);
  HostTensor y({1, 1, 1, 2}, DType::f64), m({2}, DType::f64), s({2}, DType::f64);
  EXPECT_THROW(run_op("batchnorm2d", bn_attrs(true, 1e-5), {&x, &p, &p, &p, &p}, {&y, &m, &s, &p, &p}),
               Error);
}

}  // namespace
}  // namespace trident::testing
