// cpu_ref adamw_update against a hand-written double-precision AdamW (torch.optim.AdamW as its
// documentation writes it: decay, moments, bias-corrected m̂ and v̂): several steps in f64 and
// f32, with weight decay, the bias correction of the first step and of later ones, a loss-scaled
// run whose overflowed step is skipped, and the settings refused.
#include <limits>

#include "backends/gradcheck.h"
#include "support/tolerance.h"

namespace trident::testing {
namespace {

using ir::Attrs;

struct Hyper {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// The reference, over plain vectors: p ← p − lr·wd·p; m, v moving averages of g and g²;
// p ← p − lr·m̂/(√v̂ + eps) with m̂ = m/(1 − β1^t), v̂ = v/(1 − β2^t).
struct ReferenceAdamw {
  Hyper h;
  std::vector<double> p, m, v;
  int t = 0;
  void step(const std::vector<double>& g) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= h.lr * h.weight_decay * p[i];
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(h.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(h.beta2, t));
      p[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
    }
  }
};

Attrs adamw_attrs(const Hyper& h, bool scaling = false) {
  Attrs a{{"count", int64_t{1}}, {"beta1", h.beta1}, {"beta2", h.beta2}, {"eps", h.eps}, {"weight_decay", h.weight_decay}};
  if (scaling) {
    a.set("loss_scaling", int64_t{1});
    a.set("growth_interval", int64_t{2000});
  }
  return a;
}

// The gradient of step k: different every step, of both signs and several magnitudes.
std::vector<double> gradient(int k, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.7 * static_cast<double>(i) + 0.9 * k) * (1 + static_cast<double>(i % 3));
  return g;
}

void run_steps(DType dtype, const Hyper& h, int steps) {
  const size_t n = 7;
  std::mt19937 rng(5);
  HostTensor p = random_tensor({static_cast<int64_t>(n)}, rng, -1, 1, dtype);
  ReferenceAdamw ref{h, p.values(), std::vector<double>(n), std::vector<double>(n)};
  HostTensor m({static_cast<int64_t>(n)}, dtype), v({static_cast<int64_t>(n)}, dtype), step({1}, dtype);
  HostTensor lr = HostTensor::of({1}, {h.lr}, dtype);
  for (int k = 1; k <= steps; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    HostTensor g = HostTensor::of({static_cast<int64_t>(n)}, gradient(k, n), dtype);
    ref.step(g.values());  // the gradient as the kernel sees it (rounded to dtype)
    run_op("adamw_update", adamw_attrs(h), {&lr, &p, &g, &m, &v, &step}, {&p, &m, &v, &step});
    EXPECT_EQ(step.get(0), k) << "the step count";
    test_support::expect_close(p.values(), ref.p, dtype, "parameters");
    test_support::expect_close(m.values(), ref.m, dtype, "first moments");
    test_support::expect_close(v.values(), ref.v, dtype, "second moments");
  }
}

TEST(CpuRefAdamw, F64StepsMatchTheReference) { run_steps(DType::f64, Hyper{}, 5); }
TEST(CpuRefAdamw, F32StepsMatchTheReference) { run_steps(DType::f32, Hyper{}, 5); }
TEST(CpuRefAdamw, LargeDecayAndOtherBetas) { run_steps(DType::f64, Hyper{0.1, 0.5, 0.9, 1e-3, 0.5}, 4); }

TEST(CpuRefAdamw, FirstStepMovesEveryParameterByAboutLr) {
  // At t = 1, m̂ = g and v̂ = g², so the step is lr·sign(g) (up to eps), whatever |g|.
  const Hyper h{0.01, 0.9, 0.999, 1e-8, 0};
  HostTensor lr = HostTensor::of({1}, {h.lr}), p = HostTensor::of({3}, {1, 1, 1});
  HostTensor g = HostTensor::of({3}, {100, -0.001, 3}), m({3}, DType::f64), v({3}, DType::f64), step({1}, DType::f64);
  run_op("adamw_update", adamw_attrs(h), {&lr, &p, &g, &m, &v, &step}, {&p, &m, &v, &step});
  expect_values(p, {0.99, 1.01, 0.99}, 1e-6);
}

TEST(CpuRefAdamw, OverflowedStepIsSkippedAndHalvesTheScale) {
  const Hyper h;
  const size_t n = 5;
  const double scale = 1024;
  HostTensor lr = HostTensor::of({1}, {h.lr}, DType::f32);
  HostTensor p = HostTensor::of({5}, {0.5, -0.25, 1, 2, -1}, DType::f32);
  ReferenceAdamw ref{h, p.values(), std::vector<double>(n), std::vector<double>(n)};
  HostTensor m({5}, DType::f32), v({5}, DType::f32), step({1}, DType::f32);
  HostTensor s = HostTensor::of({1}, {scale}, DType::f32), good({1}, DType::f32);
  auto scaled_gradient = [&](int k) {
    std::vector<double> g = gradient(k, n);
    for (double& x : g) x = static_cast<float>(x) * scale;  // exact: a power of two
    return HostTensor::of({5}, g, DType::f32);
  };
  auto run = [&](HostTensor& g) {
    run_op("adamw_update", adamw_attrs(h, true), {&lr, &p, &g, &m, &v, &step, &s, &good}, {&p, &m, &v, &step, &s, &good});
  };
  HostTensor g1 = scaled_gradient(1);
  run(g1);
  ref.step(HostTensor::of({5}, gradient(1, n), DType::f32).values());
  test_support::expect_close(p.values(), ref.p, DType::f32, "step 1 parameters");
  EXPECT_EQ(s.get(0), scale);
  EXPECT_EQ(good.get(0), 1);
  // An inf gradient: the parameters, moments and step count keep their values.
  const std::vector<double> p1 = p.values(), m1 = m.values(), v1 = v.values();
  HostTensor bad = scaled_gradient(2);
  bad.set(2, std::numeric_limits<double>::infinity());
  run(bad);
  EXPECT_EQ(p.values(), p1);
  EXPECT_EQ(m.values(), m1);
  EXPECT_EQ(v.values(), v1);
  EXPECT_EQ(step.get(0), 1) << "a skipped step is not counted";
  EXPECT_EQ(s.get(0), scale / 2);
  EXPECT_EQ(good.get(0), 0);
  // The next clean step is the reference's second, unscaled by the halved scale.
  std::vector<double> g2 = gradient(2, n);
  for (double& x : g2) x = static_cast<float>(x) * (scale / 2);
  HostTensor g2t = HostTensor::of({5}, g2, DType::f32);
  run(g2t);
  ref.step(HostTensor::of({5}, gradient(2, n), DType::f32).values());
  EXPECT_EQ(step.get(0), 2);
  test_support::expect_close(p.values(), ref.p, DType::f32, "step 2 parameters");
  test_support::expect_close(v.values(), ref.v, DType::f32, "step 2 second moments");
}

TEST(CpuRefAdamw, RefusesBetasOutsideTheUnitInterval) {
  HostTensor lr = HostTensor::of({1}, {0.1}), p({1}, DType::f64), g({1}, DType::f64), m({1}, DType::f64),
      v({1}, DType::f64), step({1}, DType::f64);
  for (auto [beta1, beta2] : {std::pair{1.0, 0.999}, std::pair{0.9, -0.1}}) {
    Hyper h;
    h.beta1 = beta1;
    h.beta2 = beta2;
    try {
      run_op("adamw_update", adamw_attrs(h), {&lr, &p, &g, &m, &v, &step}, {&p, &m, &v, &step});
      ADD_FAILURE() << "beta1 " << beta1 << ", beta2 " << beta2 << " were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("must lie in [0, 1)"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace trident::testing
