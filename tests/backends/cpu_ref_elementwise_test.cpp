// cpu_ref element-wise ops: relu, relu_backward (with a gradient check away from the kink),
// add, fill, and the flatten/reshape views both aliased and copied.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

using ir::Attrs;

TEST(CpuRefElementwise, Relu) {
  HostTensor x = HostTensor::of({2, 3}, {-1, 0, 2, 3.5, -0.25, 1e-9});
  HostTensor y({2, 3}, DType::f64);
  run_op("relu", {}, {&x}, {&y});
  expect_values(y, {0, 0, 2, 3.5, 0, 1e-9}, 0);
}

TEST(CpuRefElementwise, ReluBackwardPassesWherePositive) {
  HostTensor y = HostTensor::of({4}, {0, 2, 0, 1}), dy = HostTensor::of({4}, {5, 6, 7, 8});
  HostTensor dx({4}, DType::f64);
  run_op("relu_backward", {}, {&y, &dy}, {&dx});
  expect_values(dx, {0, 6, 0, 8}, 0);
}

TEST(CpuRefElementwise, ReluBackwardGradient) {
  std::mt19937 rng(3);
  const Shape s{2, 3, 4, 5};
  HostTensor x = random_tensor(s, rng), g = random_tensor(s, rng);
  auto loss = [&] {
    HostTensor y(s, DType::f64);
    run_op("relu", {}, {&x}, {&y});
    return weighted_sum(g, y);
  };
  HostTensor y(s, DType::f64), dx(s, DType::f64);
  run_op("relu", {}, {&x}, {&y});
  run_op("relu_backward", {}, {&y, &g}, {&dx});
  GradCheckOptions opt;
  opt.skip = [](int64_t, double v) { return std::abs(v) < 1e-4; };
  EXPECT_GT(expect_gradient(x, dx, loss, "dx", opt), x.numel() / 2);
}

TEST(CpuRefElementwise, Add) {
  HostTensor a = HostTensor::of({3}, {1, 2, 3}, DType::f32), b = HostTensor::of({3}, {10, -2, 0.5}, DType::f32);
  HostTensor y({3}, DType::f32);
  run_op("add", {}, {&a, &b}, {&y});
  expect_values(y, {11, 0, 3.5}, 0);
  run_op("add", {}, {&a, &b}, {&a});  // in place
  expect_values(a, {11, 0, 3.5}, 0);
}

TEST(CpuRefElementwise, FillEveryDtype) {
  const Attrs a{{"shape", std::vector<int64_t>{2, 2}}, {"value", 1.5}};
  for (DType d : {DType::f32, DType::f64}) {
    HostTensor y({2, 2}, d);
    run_op("fill", a, {}, {&y});
    expect_values(y, {1.5, 1.5, 1.5, 1.5}, 0);
  }
  HostTensor i({3}, DType::i32);
  run_op("fill", Attrs{{"shape", std::vector<int64_t>{3}}, {"value", int64_t{7}}}, {}, {&i});
  expect_values(i, {7, 7, 7}, 0);
}

TEST(CpuRefElementwise, FlattenAndReshapeAliasedDoNothing) {
  HostTensor x = HostTensor::of({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  for (const char* op : {"flatten", "reshape"}) {
    const ir::Node node = make_node(op, "view", Attrs{{"shape", std::vector<int64_t>{2, 4}}});
    ir::Graph graph;
    TensorView out{x.data(), {2, 4}, DType::f64};
    KernelRegistry::make("cpu_ref", node, graph)->run(KernelArgs{node, {x.view()}, {out}});
    expect_values(x, {1, 2, 3, 4, 5, 6, 7, 8}, 0, op);
  }
}

TEST(CpuRefElementwise, FlattenAndReshapeCopyWhenNotAliased) {
  HostTensor x = HostTensor::of({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, DType::f32);
  HostTensor y({2, 4}, DType::f32), z({8}, DType::f32);
  run_op("flatten", {}, {&x}, {&y});
  expect_values(y, {1, 2, 3, 4, 5, 6, 7, 8}, 0);
  run_op("reshape", Attrs{{"shape", std::vector<int64_t>{8}}}, {&x}, {&z});
  expect_values(z, {1, 2, 3, 4, 5, 6, 7, 8}, 0);
  HostTensor bad({7}, DType::f32);
  EXPECT_THROW(run_op("reshape", Attrs{{"shape", std::vector<int64_t>{7}}}, {&x}, {&bad}), Error);
}

TEST(CpuRefElementwise, F32MatchesF64) {
  std::mt19937 rng(11);
  HostTensor a = random_tensor({1000}, rng), b = random_tensor({1000}, rng);
  HostTensor out[2][3];
  const DType types[2] = {DType::f64, DType::f32};
  for (int t = 0; t < 2; ++t) {
    HostTensor at = a.as(types[t]), bt = b.as(types[t]);
    HostTensor y({1000}, types[t]), s({1000}, types[t]), dx({1000}, types[t]);
    run_op("relu", {}, {&at}, {&y});
    run_op("add", {}, {&at, &bt}, {&s});
    run_op("relu_backward", {}, {&y, &bt}, {&dx});
    out[t][0] = y, out[t][1] = s, out[t][2] = dx;
  }
  for (int i = 0; i < 3; ++i) expect_close(out[1][i], out[0][i], 1e-6, 1e-6);
}

}  // namespace
TEST(CpuRefChannelShuffle, InterleavesTheGroups) {
  // 6 channels in 2 groups (0 1 2 | 3 4 5) come out as 0 3 1 4 2 5, row by row.
  HostTensor x = HostTensor::of({2, 6}, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  HostTensor y({2, 6}, DType::f64);
  run_op("channel_shuffle", {{"groups", int64_t{2}}}, {&x}, {&y});
  expect_values(y, {0, 3, 1, 4, 2, 5, 10, 13, 11, 14, 12, 15}, 0);
  // Its backward is the shuffle with C/g groups: back to the input.
  HostTensor back({2, 6}, DType::f64);
  run_op("channel_shuffle", {{"groups", int64_t{3}}}, {&y}, {&back});
  expect_values(back, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, 0);
}

}  // namespace trident::testing
