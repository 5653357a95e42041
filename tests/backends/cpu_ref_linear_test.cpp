// cpu_ref linear: a hand-computed forward with and without bias, gradient checks of
// linear_backward_data / linear_backward_weight, and f32/f64 agreement.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

TEST(CpuRefLinear, HandComputed) {
  HostTensor x = HostTensor::of({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor w = HostTensor::of({2, 3}, {1, 0, -1, 2, 1, 0});
  HostTensor b = HostTensor::of({2}, {0.5, -1});
  HostTensor y({2, 2}, DType::f64);
  run_op("linear", {}, {&x, &w, &b}, {&y});
  expect_values(y, {1 - 3 + 0.5, 2 + 2 - 1, 4 - 6 + 0.5, 8 + 5 - 1}, 0);
  run_op("linear", {}, {&x, &w}, {&y});
  expect_values(y, {-2, 4, -2, 13}, 0);
}

TEST(CpuRefLinear, BackwardHandComputed) {
  HostTensor x = HostTensor::of({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor w = HostTensor::of({2, 3}, {1, 0, -1, 2, 1, 0});
  HostTensor dy = HostTensor::of({2, 2}, {1, 0, 0, 2});
  HostTensor dx({2, 3}, DType::f64), dw({2, 3}, DType::f64), db({2}, DType::f64);
  run_op("linear_backward_data", {}, {&dy, &w}, {&dx});
  expect_values(dx, {1, 0, -1, 4, 2, 0}, 0);  // row 0 = w[0], row 1 = 2·w[1]
  run_op("linear_backward_weight", Attrs{{"has_bias", int64_t{1}}}, {&x, &dy}, {&dw, &db});
  expect_values(dw, {1, 2, 3, 8, 10, 12}, 0);  // dw[0] = x[0], dw[1] = 2·x[1]
  expect_values(db, {1, 2}, 0);
}

TEST(CpuRefLinear, Gradients) {
  std::mt19937 rng(17);
  const int64_t N = 5, I = 11, O = 7;
  HostTensor x = random_tensor({N, I}, rng), w = random_tensor({O, I}, rng);
  HostTensor b = random_tensor({O}, rng), g = random_tensor({N, O}, rng);
  auto loss = [&] {
    HostTensor y({N, O}, DType::f64);
    run_op("linear", {}, {&x, &w, &b}, {&y});
    return weighted_sum(g, y);
  };
  HostTensor dx({N, I}, DType::f64), dw({O, I}, DType::f64), db({O}, DType::f64);
  run_op("linear_backward_data", {}, {&g, &w}, {&dx});
  run_op("linear_backward_weight", Attrs{{"has_bias", int64_t{1}}}, {&x, &g}, {&dw, &db});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
  EXPECT_EQ(expect_gradient(w, dw, loss, "dw"), w.numel());
  EXPECT_EQ(expect_gradient(b, db, loss, "db"), b.numel());
  HostTensor dw2({O, I}, DType::f64);
  run_op("linear_backward_weight", Attrs{{"has_bias", int64_t{0}}}, {&x, &g}, {&dw2});
  expect_close(dw2, dw, 0, 0, "dw without bias");
}

TEST(CpuRefLinear, F32MatchesF64) {
  std::mt19937 rng(19);
  const int64_t N = 16, I = 100, O = 10;
  HostTensor x = random_tensor({N, I}, rng), w = random_tensor({O, I}, rng);
  HostTensor b = random_tensor({O}, rng), g = random_tensor({N, O}, rng);
  std::vector<HostTensor> res[2];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    const DType d = types[t];
    HostTensor xt = x.as(d), wt = w.as(d), bt = b.as(d), gt = g.as(d);
    HostTensor y({N, O}, d), dx({N, I}, d), dw({O, I}, d), db({O}, d);
    run_op("linear", {}, {&xt, &wt, &bt}, {&y});
    run_op("linear_backward_data", {}, {&gt, &wt}, {&dx});
    run_op("linear_backward_weight", Attrs{{"has_bias", int64_t{1}}}, {&xt, &gt}, {&dw, &db});
    res[t] = {y, dx, dw, db};
  }
  for (size_t i = 0; i < res[0].size(); ++i) expect_close(res[1][i], res[0][i], 1e-4, 1e-4);
}

TEST(CpuRefLinear, RejectsMismatchedShapes) {
  HostTensor x({2, 3}, DType::f32), w({4, 5}, DType::f32), y({2, 4}, DType::f32);
  EXPECT_THROW(run_op("linear", {}, {&x, &w}, {&y}), Error);
}

}  // namespace
}  // namespace trident::testing
