// cpu_ref pooling: max (ties, padding that never wins), average with and without
// count_include_pad, global average; gradient checks of every backward; f32/f64 agreement.
#include <algorithm>
#include <numeric>

#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

Attrs pool_attrs(int64_t k, int64_t stride, int64_t pad, int64_t include_pad = 1) {
  return Attrs{{"kernel", std::vector<int64_t>{k, k}},
               {"stride", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad}},
               {"count_include_pad", include_pad}};
}

TEST(CpuRefPool, MaxpoolBlocks) {
  HostTensor x = HostTensor::of({1, 4, 4, 1}, {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, -1, -2, 9, 0, -3, -4});
  HostTensor y({1, 2, 2, 1}, DType::f64);
  run_op("maxpool2d", pool_attrs(2, 2, 0), {&x}, {&y});
  expect_values(y, {5, 8, 9, -1}, 0);
}

TEST(CpuRefPool, MaxpoolPaddingNeverWins) {
  HostTensor x = HostTensor::of({1, 2, 2, 1}, {-1, -2, -3, -4});
  HostTensor y({1, 3, 3, 1}, DType::f64);
  run_op("maxpool2d", pool_attrs(2, 1, 1), {&x}, {&y});
  // Every window holds padding (zeros, were they counted) and only negative values.
  expect_values(y, {-1, -1, -2, -1, -1, -2, -3, -3, -4}, 0);
}

TEST(CpuRefPool, MaxpoolTiesGoToTheFirstMaximum) {
  HostTensor x = HostTensor::of({1, 2, 3, 1}, {7, 7, 7, 7, 7, 7});
  HostTensor y({1, 1, 2, 1}, DType::f64);
  run_op("maxpool2d", pool_attrs(2, 1, 0), {&x}, {&y});
  expect_values(y, {7, 7}, 0);
  HostTensor dy = HostTensor::of({1, 1, 2, 1}, {1, 10}), dx({1, 2, 3, 1}, DType::f64);
  run_op("maxpool2d_backward", pool_attrs(2, 1, 0), {&x, &dy}, {&dx});
  // Window (0,0) covers columns 0-1 and picks (0,0); window (0,1) covers 1-2 and picks (0,1).
  expect_values(dx, {1, 10, 0, 0, 0, 0}, 0);
}

TEST(CpuRefPool, MaxpoolOverlappingWindowsAccumulate) {
  HostTensor x = HostTensor::of({1, 3, 3, 1}, {0, 0, 0, 0, 9, 0, 0, 0, 0});
  HostTensor dy = HostTensor::of({1, 2, 2, 1}, {1, 2, 3, 4}), dx({1, 3, 3, 1}, DType::f64);
  run_op("maxpool2d_backward", pool_attrs(2, 1, 0), {&x, &dy}, {&dx});
  expect_values(dx, {0, 0, 0, 0, 10, 0, 0, 0, 0}, 0);
}

TEST(CpuRefPool, AvgpoolCountIncludePad) {
  HostTensor x = HostTensor::of({1, 2, 2, 1}, {1, 2, 3, 4});
  HostTensor y({1, 3, 3, 1}, DType::f64);
  run_op("avgpool2d", pool_attrs(2, 1, 1, 1), {&x}, {&y});
  expect_values(y, {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}, 1e-15);
}

TEST(CpuRefPool, AvgpoolExcludePad) {
  HostTensor x = HostTensor::of({1, 2, 2, 1}, {1, 2, 3, 4});
  HostTensor y({1, 3, 3, 1}, DType::f64);
  run_op("avgpool2d", pool_attrs(2, 1, 1, 0), {&x}, {&y});
  expect_values(y, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}, 1e-15);
}

TEST(CpuRefPool, AvgpoolDefaultsToIncludePad) {
  HostTensor x = HostTensor::of({1, 2, 2, 1}, {1, 2, 3, 4});
  HostTensor y({1, 3, 3, 1}, DType::f64);
  Attrs a = pool_attrs(2, 1, 1);
  Attrs no_flag{{"kernel", a.ints("kernel")}, {"stride", a.ints("stride")}, {"padding", a.ints("padding")}};
  run_op("avgpool2d", no_flag, {&x}, {&y});
  EXPECT_DOUBLE_EQ(y.get(0), 0.25);
}

TEST(CpuRefPool, GlobalAvgpool) {
  HostTensor x = HostTensor::of({1, 2, 2, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  HostTensor y({1, 1, 1, 2}, DType::f64);
  run_op("global_avgpool", {}, {&x}, {&y});
  expect_values(y, {2.5, 25}, 0);
  HostTensor dy = HostTensor::of({1, 1, 1, 2}, {4, 8}), dx({1, 2, 2, 2}, DType::f64);
  run_op("global_avgpool_backward", Attrs{{"input_shape", std::vector<int64_t>{1, 2, 2, 2}}}, {&dy},
         {&dx});
  expect_values(dx, {1, 2, 1, 2, 1, 2, 1, 2}, 0);
}

// Random values that are all distinct (a shuffled ramp), so no max window has a tie and a
// 1e-6 nudge never changes the winner.
HostTensor distinct_values(const Shape& s, std::mt19937& rng) {
  HostTensor t(s, DType::f64);
  std::vector<int64_t> order(static_cast<size_t>(t.numel()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, -1.0 + 0.01 * static_cast<double>(order[i]));
  return t;
}

int64_t out_extent(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

void check_pool_gradient(const std::string& op, const Attrs& a, bool needs_x) {
  SCOPED_TRACE(op + " " + a.to_string());
  std::mt19937 rng(21);
  const Shape xs{2, 7, 6, 3};
  const auto& k = a.ints("kernel");
  const auto& s = a.ints("stride");
  const auto& p = a.ints("padding");
  const Shape ys{2, out_extent(7, k[0], s[0], p[0]), out_extent(6, k[1], s[1], p[1]), 3};
  HostTensor x = distinct_values(xs, rng), g = random_tensor(ys, rng);
  auto loss = [&] {
    HostTensor y(ys, DType::f64);
    run_op(op, a, {&x}, {&y});
    return weighted_sum(g, y);
  };
  HostTensor dx(xs, DType::f64);
  Attrs ba = a;
  ba.set("input_shape", xs);
  if (needs_x)
    run_op(op + "_backward", ba, {&x, &g}, {&dx});
  else
    run_op(op + "_backward", ba, {&g}, {&dx});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
}

TEST(CpuRefPool, MaxpoolGradient) {
  check_pool_gradient("maxpool2d", pool_attrs(2, 2, 0), true);
  check_pool_gradient("maxpool2d", pool_attrs(3, 2, 1), true);
  check_pool_gradient("maxpool2d", pool_attrs(3, 1, 1), true);
}

TEST(CpuRefPool, AvgpoolGradientIncludePad) {
  check_pool_gradient("avgpool2d", pool_attrs(2, 2, 0, 1), false);
  check_pool_gradient("avgpool2d", pool_attrs(3, 2, 1, 1), false);
  check_pool_gradient("avgpool2d", pool_attrs(3, 1, 1, 1), false);
}

TEST(CpuRefPool, AvgpoolGradientExcludePad) {
  check_pool_gradient("avgpool2d", pool_attrs(3, 2, 1, 0), false);
  check_pool_gradient("avgpool2d", pool_attrs(3, 1, 1, 0), false);
}

TEST(CpuRefPool, GlobalAvgpoolGradient) {
  std::mt19937 rng(8);
  const Shape xs{3, 4, 5, 6}, ys{3, 1, 1, 6};
  HostTensor x = random_tensor(xs, rng), g = random_tensor(ys, rng);
  auto loss = [&] {
    HostTensor y(ys, DType::f64);
    run_op("global_avgpool", {}, {&x}, {&y});
    return weighted_sum(g, y);
  };
  HostTensor dx(xs, DType::f64);
  run_op("global_avgpool_backward", Attrs{{"input_shape", xs}}, {&g}, {&dx});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
}

TEST(CpuRefPool, F32MatchesF64) {
  std::mt19937 rng(13);
  const Shape xs{2, 9, 8, 5}, ys{2, 5, 4, 5}, gs{2, 1, 1, 5};
  HostTensor x = random_tensor(xs, rng), g = random_tensor(ys, rng), gg = random_tensor(gs, rng);
  const Attrs a = pool_attrs(3, 2, 1, 0);
  Attrs ba = a;
  ba.set("input_shape", xs);
  std::vector<HostTensor> res[2];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    const DType d = types[t];
    HostTensor xt = x.as(d), gt = g.as(d), ggt = gg.as(d);
    HostTensor my(ys, d), ay(ys, d), gy(gs, d), mdx(xs, d), adx(xs, d), gdx(xs, d);
    run_op("maxpool2d", a, {&xt}, {&my});
    run_op("avgpool2d", a, {&xt}, {&ay});
    run_op("global_avgpool", {}, {&xt}, {&gy});
    run_op("maxpool2d_backward", ba, {&xt, &gt}, {&mdx});
    run_op("avgpool2d_backward", ba, {&gt}, {&adx});
    run_op("global_avgpool_backward", ba, {&ggt}, {&gdx});
    res[t] = {my, ay, gy, mdx, adx, gdx};
  }
  for (size_t i = 0; i < res[0].size(); ++i) expect_close(res[1][i], res[0][i], 1e-6, 1e-5);
}

}  // namespace
}  // namespace trident::testing
