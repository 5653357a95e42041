// cpu_ref softmax_cross_entropy: the loss and gradient of known logits (with and without label
// smoothing), a gradient check of the backward against the forward, stability on huge logits,
// and label validation.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

TEST(CpuRefLoss, KnownLogits) {
  // Row 0: uniform logits, loss log 3. Row 1: logits 1,2,3 with label 2: log(e+e²+e³) − 3.
  HostTensor logits = HostTensor::of({2, 3}, {0, 0, 0, 1, 2, 3});
  HostTensor labels = HostTensor::of({2}, {0, 2}, DType::i32);
  HostTensor loss({1}, DType::f64);
  run_op("softmax_cross_entropy", {}, {&logits, &labels}, {&loss});
  EXPECT_NEAR(loss.get(0), (1.0986122886681098 + 0.40760596444438013) / 2, 1e-14);
  EXPECT_NEAR(loss.get(0), 0.753109126556245, 1e-14);

  HostTensor dloss = HostTensor::of({1}, {1}), dlogits({2, 3}, DType::f64);
  run_op("softmax_cross_entropy_backward", {}, {&logits, &labels, &dloss}, {&dlogits});
  // (softmax − onehot) / N
  expect_values(dlogits,
                {(1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6, 0.04501528658519024, 0.12236423552739885,
                 0.332620477887411 - 0.5},
                1e-14);
}

TEST(CpuRefLoss, LabelSmoothingKnownLogits) {
  // ε = 0.3 over K = 3: the target is 0.8 on the label, 0.1 elsewhere. Row 1: logits 1,2,3,
  // label 2: loss = lse − 0.7·3 − 0.1·(1 + 2 + 3), lse = log(e + e² + e³).
  HostTensor logits = HostTensor::of({1, 3}, {1, 2, 3});
  HostTensor labels = HostTensor::of({1}, {2}, DType::i32);
  HostTensor loss({1}, DType::f64);
  const ir::Attrs eps{{"label_smoothing", 0.3}};
  run_op("softmax_cross_entropy", eps, {&logits, &labels}, {&loss});
  const double lse = 3.40760596444438013;
  EXPECT_NEAR(loss.get(0), lse - 0.7 * 3 - 0.1 * 6, 1e-14);
  HostTensor dloss = HostTensor::of({1}, {1}), dlogits({1, 3}, DType::f64);
  run_op("softmax_cross_entropy_backward", eps, {&logits, &labels, &dloss}, {&dlogits});
  expect_values(dlogits, {0.09003057317038046 - 0.1, 0.24472847105479767 - 0.1, 0.6652409557748219 - 0.8}, 1e-14);
}

TEST(CpuRefLoss, LabelSmoothingGradient) {
  std::mt19937 rng(31);
  const int64_t N = 5, K = 7;
  HostTensor logits = random_tensor({N, K}, rng, -3, 3);
  HostTensor labels = HostTensor::of({N}, {0, 6, 2, 3, 1}, DType::i32);
  HostTensor g = HostTensor::of({1}, {1.3});
  const ir::Attrs eps{{"label_smoothing", 0.1}};
  auto loss = [&] {
    HostTensor l({1}, DType::f64);
    run_op("softmax_cross_entropy", eps, {&logits, &labels}, {&l});
    return weighted_sum(g, l);
  };
  HostTensor dlogits({N, K}, DType::f64);
  run_op("softmax_cross_entropy_backward", eps, {&logits, &labels, &g}, {&dlogits});
  EXPECT_EQ(expect_gradient(logits, dlogits, loss, "dlogits"), logits.numel());
}

TEST(CpuRefLoss, HugeLogitsStayFinite) {
  HostTensor logits = HostTensor::of({1, 2}, {1000, 0}, DType::f32);
  HostTensor labels = HostTensor::of({1}, {1}, DType::i32);
  HostTensor loss({1}, DType::f32);
  run_op("softmax_cross_entropy", {}, {&logits, &labels}, {&loss});
  EXPECT_FLOAT_EQ(static_cast<float>(loss.get(0)), 1000.0f);
}

TEST(CpuRefLoss, Gradient) {
  std::mt19937 rng(23);
  const int64_t N = 6, K = 5;
  HostTensor logits = random_tensor({N, K}, rng, -3, 3);
  HostTensor labels = HostTensor::of({N}, {0, 4, 2, 2, 1, 3}, DType::i32);
  HostTensor g = HostTensor::of({1}, {0.7});  // upstream gradient of the scalar loss
  auto loss = [&] {
    HostTensor l({1}, DType::f64);
    run_op("softmax_cross_entropy", {}, {&logits, &labels}, {&l});
    return weighted_sum(g, l);
  };
  HostTensor dlogits({N, K}, DType::f64);
  run_op("softmax_cross_entropy_backward", {}, {&logits, &labels, &g}, {&dlogits});
  EXPECT_EQ(expect_gradient(logits, dlogits, loss, "dlogits"), logits.numel());
}

TEST(CpuRefLoss, F32MatchesF64) {
  std::mt19937 rng(29);
  HostTensor logits = random_tensor({32, 10}, rng, -5, 5);
  HostTensor labels({32}, DType::i32);
  for (int i = 0; i < 32; ++i) labels.set(i, (i * 7) % 10);
  HostTensor res[2][2];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    HostTensor lt = logits.as(types[t]), loss({1}, types[t]), d({32, 10}, types[t]);
    HostTensor seed = HostTensor::of({1}, {1}, types[t]);
    run_op("softmax_cross_entropy", {}, {&lt, &labels}, {&loss});
    run_op("softmax_cross_entropy_backward", {}, {&lt, &labels, &seed}, {&d});
    res[t][0] = loss, res[t][1] = d;
  }
  expect_close(res[1][0], res[0][0], 1e-5, 1e-5, "loss");
  expect_close(res[1][1], res[0][1], 1e-6, 1e-5, "dlogits");
}

TEST(CpuRefLoss, RejectsOutOfRangeLabels) {
  HostTensor logits({2, 3}, DType::f32), labels = HostTensor::of({2}, {0, 3}, DType::i32);
  HostTensor loss({1}, DType::f32);
  try {
    run_op("softmax_cross_entropy", {}, {&logits, &labels}, {&loss});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::testing
