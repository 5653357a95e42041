// cpu_ref conv2d: hand-computed forward cases (padding, stride, dilation, groups), gradient
// checks of conv2d_backward_data / conv2d_backward_weight, and f32/f64 agreement.
#include <omp.h>

#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

Attrs conv_attrs(int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
  return Attrs{{"stride", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad}},
               {"dilation", std::vector<int64_t>{dil, dil}},
               {"groups", groups}};
}

// x[0,i,j,0] = 4i + j + 1: the numbers 1..16 in a 4x4 image.
HostTensor one_to_sixteen() {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i + 1;
  return HostTensor::of({1, 4, 4, 1}, v);
}

TEST(CpuRefConv, SobelWithoutPaddingIsConstant) {
  HostTensor x = one_to_sixteen();
  HostTensor w = HostTensor::of({1, 3, 3, 1}, {1, 0, -1, 2, 0, -2, 1, 0, -1});
  HostTensor y({1, 2, 2, 1}, DType::f64);
  run_op("conv2d", conv_attrs(1, 0, 1, 1), {&x, &w}, {&y});
  // Each row of the window contributes x[i][j] − x[i][j+2] = −2, weighted 1, 2, 1.
  expect_values(y, {-8, -8, -8, -8}, 0);
}

TEST(CpuRefConv, SobelWithPaddingAndBias) {
  HostTensor x = one_to_sixteen();
  HostTensor w = HostTensor::of({1, 3, 3, 1}, {1, 0, -1, 2, 0, -2, 1, 0, -1});
  HostTensor b = HostTensor::of({1}, {0.5});
  HostTensor y({1, 4, 4, 1}, DType::f64);
  run_op("conv2d", conv_attrs(1, 1, 1, 1), {&x, &w, &b}, {&y});
  // (0,0): only x00, x01, x10, x11 are in bounds: 0·1 − 2·2 + 0·5 − 1·6 = −10.
  EXPECT_EQ(y.get(0), -10 + 0.5);
  // (0,1): 2·1 + 0·2 − 2·3 + 1·5 + 0·6 − 1·7 = −6.
  EXPECT_EQ(y.get(1), -6 + 0.5);
  // Interior (1,1): −8 as without padding.
  EXPECT_EQ(y.get(5), -8 + 0.5);
  // (0,3): left columns only: 2·3 + 1·7 = 13 (right column is padding).
  EXPECT_EQ(y.get(3), 13 + 0.5);
}

TEST(CpuRefConv, StrideTwoSumsBlocks) {
  HostTensor x = one_to_sixteen();
  HostTensor w = HostTensor::of({1, 2, 2, 1}, {1, 1, 1, 1});
  HostTensor y({1, 2, 2, 1}, DType::f64);
  run_op("conv2d", conv_attrs(2, 0, 1, 1), {&x, &w}, {&y});
  expect_values(y, {1 + 2 + 5 + 6, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16}, 0);
}

TEST(CpuRefConv, DilationTwoSkipsAPixel) {
  HostTensor x = one_to_sixteen();
  HostTensor w = HostTensor::of({1, 2, 2, 1}, {1, 1, 1, 1});
  HostTensor y({1, 2, 2, 1}, DType::f64);
  run_op("conv2d", conv_attrs(1, 0, 2, 1), {&x, &w}, {&y});
  // y[p,q] = x[p,q] + x[p,q+2] + x[p+2,q] + x[p+2,q+2]
  expect_values(y, {1 + 3 + 9 + 11, 2 + 4 + 10 + 12, 5 + 7 + 13 + 15, 6 + 8 + 14 + 16}, 0);
}

TEST(CpuRefConv, GroupsReadTheirOwnChannels) {
  HostTensor x = HostTensor::of({1, 1, 1, 4}, {1, 2, 3, 4});
  // K = 4, groups = 2: filters 0,1 read channels 0,1; filters 2,3 read channels 2,3.
  HostTensor w = HostTensor::of({4, 1, 1, 2}, {1, 1, 1, -1, 2, 0, 0, 3});
  HostTensor y({1, 1, 1, 4}, DType::f64);
  run_op("conv2d", conv_attrs(1, 0, 1, 2), {&x, &w}, {&y});
  expect_values(y, {1 + 2, 1 - 2, 2 * 3, 3 * 4}, 0);
}

TEST(CpuRefConv, MultiChannelInnerProduct) {
  // Two pixels, three channels, two filters of 1x1: a per-pixel matrix product.
  HostTensor x = HostTensor::of({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor w = HostTensor::of({2, 1, 1, 3}, {1, 0, 1, 0, 2, 0});
  HostTensor y({1, 1, 2, 2}, DType::f64);
  run_op("conv2d", conv_attrs(1, 0, 1, 1), {&x, &w}, {&y});
  expect_values(y, {1 + 3, 4, 4 + 6, 10}, 0);
}

TEST(CpuRefConv, BackwardDataOfHandCase) {
  // dx of a 2x2 all-ones filter, stride 1, on a 3x3 input: how many windows cover each pixel.
  HostTensor dy = HostTensor::of({1, 2, 2, 1}, {1, 1, 1, 1});
  HostTensor w = HostTensor::of({1, 2, 2, 1}, {1, 1, 1, 1});
  HostTensor dx({1, 3, 3, 1}, DType::f64);
  Attrs a = conv_attrs(1, 0, 1, 1);
  a.set("input_shape", std::vector<int64_t>{1, 3, 3, 1});
  run_op("conv2d_backward_data", a, {&dy, &w}, {&dx});
  expect_values(dx, {1, 2, 1, 2, 4, 2, 1, 2, 1}, 0);
}

struct ConvCase {
  const char* name;
  Shape x, w;
  int64_t stride, pad, dil, groups;
};

int64_t out_extent(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

void check_conv_gradients(const ConvCase& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(1234);
  const Shape y_shape{c.x[0], out_extent(c.x[1], c.w[1], c.stride, c.pad, c.dil),
                      out_extent(c.x[2], c.w[2], c.stride, c.pad, c.dil), c.w[0]};
  HostTensor x = random_tensor(c.x, rng);
  HostTensor w = random_tensor(c.w, rng);
  HostTensor b = random_tensor({c.w[0]}, rng);
  HostTensor g = random_tensor(y_shape, rng);
  const Attrs fwd = conv_attrs(c.stride, c.pad, c.dil, c.groups);
  auto loss = [&] {
    HostTensor y(y_shape, DType::f64);
    run_op("conv2d", fwd, {&x, &w, &b}, {&y});
    return weighted_sum(g, y);
  };

  Attrs bd = fwd;
  bd.set("input_shape", c.x);
  HostTensor dx(c.x, DType::f64);
  run_op("conv2d_backward_data", bd, {&g, &w}, {&dx});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());

  Attrs bw = fwd;
  bw.set("weight_shape", c.w);
  bw.set("has_bias", int64_t{1});
  HostTensor dw(c.w, DType::f64), db({c.w[0]}, DType::f64);
  run_op("conv2d_backward_weight", bw, {&x, &g}, {&dw, &db});
  expect_gradient(w, dw, loss, "dw");
  expect_gradient(b, db, loss, "db");

  // Without a bias output the weight gradient is the same.
  bw.set("has_bias", int64_t{0});
  HostTensor dw2(c.w, DType::f64);
  run_op("conv2d_backward_weight", bw, {&x, &g}, {&dw2});
  expect_close(dw2, dw, 0, 0, "dw without bias");
}

TEST(CpuRefConv, GradientsPlain) { check_conv_gradients({"plain", {2, 5, 5, 3}, {4, 3, 3, 3}, 1, 0, 1, 1}); }
TEST(CpuRefConv, GradientsPadded) { check_conv_gradients({"padded", {2, 5, 4, 3}, {2, 3, 3, 3}, 1, 1, 1, 1}); }
TEST(CpuRefConv, GradientsStride2) { check_conv_gradients({"stride 2", {2, 6, 7, 2}, {3, 3, 3, 2}, 2, 1, 1, 1}); }
TEST(CpuRefConv, GradientsGroups) { check_conv_gradients({"groups 2", {2, 5, 5, 4}, {6, 3, 3, 2}, 1, 1, 1, 2}); }
TEST(CpuRefConv, GradientsDilation) { check_conv_gradients({"dilation 2", {1, 7, 6, 3}, {2, 3, 2, 3}, 1, 1, 2, 1}); }
TEST(CpuRefConv, GradientsEverything) {
  check_conv_gradients({"stride 2, pad 2, dilation 2, groups 3", {2, 8, 7, 6}, {6, 3, 3, 2}, 2, 2, 2, 3});
}

TEST(CpuRefConv, F32MatchesF64) {
  std::mt19937 rng(7);
  const Attrs a = conv_attrs(2, 1, 1, 2);
  HostTensor x = random_tensor({3, 9, 9, 8}, rng), w = random_tensor({6, 3, 3, 4}, rng);
  HostTensor b = random_tensor({6}, rng), g = random_tensor({3, 5, 5, 6}, rng);
  HostTensor results[2][4];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    HostTensor xt = x.as(types[t]), wt = w.as(types[t]), bt = b.as(types[t]), gt = g.as(types[t]);
    HostTensor y({3, 5, 5, 6}, types[t]), dx({3, 9, 9, 8}, types[t]);
    HostTensor dw({6, 3, 3, 4}, types[t]), db({6}, types[t]);
    run_op("conv2d", a, {&xt, &wt, &bt}, {&y});
    run_op("conv2d_backward_data", a, {&gt, &wt}, {&dx});
    Attrs bw = a;
    bw.set("has_bias", int64_t{1});
    run_op("conv2d_backward_weight", bw, {&xt, &gt}, {&dw, &db});
    results[t][0] = y, results[t][1] = dx, results[t][2] = dw, results[t][3] = db;
  }
  const char* names[4] = {"y", "dx", "dw", "db"};
  for (int i = 0; i < 4; ++i) expect_close(results[1][i], results[0][i], 1e-4, 1e-4, names[i]);
}

TEST(CpuRefConv, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(41);
  Attrs a = conv_attrs(1, 1, 1, 1);
  a.set("has_bias", int64_t{1});
  HostTensor x = random_tensor({5, 7, 7, 6}, rng, -1, 1, DType::f32);
  HostTensor w = random_tensor({13, 3, 3, 6}, rng, -1, 1, DType::f32);
  HostTensor g = random_tensor({5, 7, 7, 13}, rng, -1, 1, DType::f32);
  std::vector<HostTensor> res[2];
  const int saved = omp_get_max_threads();
  const int threads[2] = {1, 3};
  for (int t = 0; t < 2; ++t) {
    omp_set_num_threads(threads[t]);
    HostTensor y({5, 7, 7, 13}, DType::f32), dx({5, 7, 7, 6}, DType::f32);
    HostTensor dw({13, 3, 3, 6}, DType::f32), db({13}, DType::f32);
    run_op("conv2d", a, {&x, &w}, {&y});
    run_op("conv2d_backward_data", a, {&g, &w}, {&dx});
    run_op("conv2d_backward_weight", a, {&x, &g}, {&dw, &db});
    res[t] = {y, dx, dw, db};
  }
  omp_set_num_threads(saved);
  for (size_t i = 0; i < res[0].size(); ++i) expect_close(res[1][i], res[0][i], 0, 0, "bit-exact");
}

TEST(CpuRefConv, RejectsIntegerTensorsNamingTheNode) {
  HostTensor x({1, 3, 3, 1}, DType::i32), w({1, 1, 1, 1}, DType::i32), y({1, 3, 3, 1}, DType::i32);
  try {
    run_op("conv2d", conv_attrs(1, 0, 1, 1), {&x, &w}, {&y});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test_conv2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
}

TEST(CpuRefConv, RejectsMismatchedOutputExtent) {
  HostTensor x({1, 4, 4, 1}, DType::f64), w({1, 3, 3, 1}, DType::f64), y({1, 4, 4, 1}, DType::f64);
  EXPECT_THROW(run_op("conv2d", conv_attrs(1, 0, 1, 1), {&x, &w}, {&y}), Error);
}

}  // namespace
}  // namespace trident::testing
