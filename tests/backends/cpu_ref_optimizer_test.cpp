// cpu_ref sgd_update: two in-place steps with momentum and weight decay (plain and Nesterov)
// against hand-computed values, several parameter tensors in one node, f32/f64 agreement.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

Attrs sgd_attrs(int64_t count, double momentum, double wd, bool nesterov) {
  return Attrs{{"count", count}, {"momentum", momentum}, {"weight_decay", wd},
               {"nesterov", int64_t{nesterov ? 1 : 0}}};
}

TEST(CpuRefOptimizer, TwoStepsWithMomentumAndWeightDecay) {
  HostTensor lr = HostTensor::of({1}, {0.1});
  HostTensor p = HostTensor::of({1}, {1}), g = HostTensor::of({1}, {0.5}), m({1}, DType::f64);
  const Attrs a = sgd_attrs(1, 0.9, 0.01, false);
  run_op("sgd_update", a, {&lr, &p, &g, &m}, {&p, &m});
  // g' = 0.5 + 0.01·1 = 0.51; m = 0.51; p = 1 − 0.1·0.51
  EXPECT_NEAR(m.get(0), 0.51, 1e-15);
  EXPECT_NEAR(p.get(0), 0.949, 1e-15);
  run_op("sgd_update", a, {&lr, &p, &g, &m}, {&p, &m});
  // g' = 0.5 + 0.01·0.949 = 0.50949; m = 0.9·0.51 + 0.50949 = 0.96849; p = 0.949 − 0.096849
  EXPECT_NEAR(m.get(0), 0.96849, 1e-15);
  EXPECT_NEAR(p.get(0), 0.852151, 1e-15);
  EXPECT_EQ(g.get(0), 0.5);  // the gradient is not modified
}

TEST(CpuRefOptimizer, TwoNesterovSteps) {
  HostTensor lr = HostTensor::of({1}, {0.1});
  HostTensor p = HostTensor::of({1}, {1}), g = HostTensor::of({1}, {0.5}), m({1}, DType::f64);
  const Attrs a = sgd_attrs(1, 0.9, 0.01, true);
  run_op("sgd_update", a, {&lr, &p, &g, &m}, {&p, &m});
  // m = 0.51; p = 1 − 0.1·(0.51 + 0.9·0.51) = 0.9031
  EXPECT_NEAR(m.get(0), 0.51, 1e-15);
  EXPECT_NEAR(p.get(0), 0.9031, 1e-15);
  run_op("sgd_update", a, {&lr, &p, &g, &m}, {&p, &m});
  // g' = 0.509031; m = 0.459 + 0.509031 = 0.968031; p = 0.9031 − 0.1·(0.509031 + 0.8712279)
  EXPECT_NEAR(m.get(0), 0.968031, 1e-15);
  EXPECT_NEAR(p.get(0), 0.76507411, 1e-15);
}

TEST(CpuRefOptimizer, PlainSgdWithoutMomentum) {
  HostTensor lr = HostTensor::of({1}, {0.5}, DType::f32);
  HostTensor p = HostTensor::of({3}, {1, 2, 3}, DType::f32), g = HostTensor::of({3}, {2, -2, 0}, DType::f32);
  HostTensor m({3}, DType::f32);
  run_op("sgd_update", sgd_attrs(1, 0, 0, false), {&lr, &p, &g, &m}, {&p, &m});
  expect_values(p, {0, 3, 3}, 0);
}

TEST(CpuRefOptimizer, SeveralTensorsOneNode) {
  HostTensor lr = HostTensor::of({1}, {1});
  HostTensor p0 = HostTensor::of({2}, {1, 2}), p1 = HostTensor::of({1, 3}, {3, 4, 5});
  HostTensor g0 = HostTensor::of({2}, {1, 1}), g1 = HostTensor::of({1, 3}, {-1, 0, 1});
  HostTensor m0 = HostTensor::of({2}, {1, 0}), m1 = HostTensor::of({1, 3}, {0, 2, 0});
  run_op("sgd_update", sgd_attrs(2, 0.5, 0, false), {&lr, &p0, &p1, &g0, &g1, &m0, &m1},
         {&p0, &p1, &m0, &m1});
  expect_values(m0, {1.5, 1}, 0);
  expect_values(p0, {-0.5, 1}, 0);
  expect_values(m1, {-1, 1, 1}, 0);
  expect_values(p1, {4, 3, 4}, 0);
}

TEST(CpuRefOptimizer, F32MatchesF64) {
  std::mt19937 rng(31);
  HostTensor p = random_tensor({257}, rng), g = random_tensor({257}, rng), m = random_tensor({257}, rng);
  HostTensor res[2][2];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    HostTensor lr = HostTensor::of({1}, {0.05}, types[t]);
    HostTensor pt = p.as(types[t]), gt = g.as(types[t]), mt = m.as(types[t]);
    for (int step = 0; step < 3; ++step)
      run_op("sgd_update", sgd_attrs(1, 0.9, 5e-4, true), {&lr, &pt, &gt, &mt}, {&pt, &mt});
    res[t][0] = pt, res[t][1] = mt;
  }
  expect_close(res[1][0], res[0][0], 1e-6, 1e-6, "params");
  expect_close(res[1][1], res[0][1], 1e-6, 1e-6, "momentum");
}

TEST(CpuRefOptimizer, RejectsWrongArity) {
  HostTensor lr = HostTensor::of({1}, {1}), p({2}, DType::f64), g({2}, DType::f64);
  EXPECT_THROW(run_op("sgd_update", sgd_attrs(1, 0.9, 0, false), {&lr, &p, &g}, {&p}), Error);
}

}  // namespace
}  // namespace trident::testing
