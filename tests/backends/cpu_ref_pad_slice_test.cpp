// pad2d and channel_slice on the reference backend: values by hand (padding, cropping, a
// slice, a slice placed back into zeros), and every gradient — pad2d's, channel_slice's and
// concat's, as their registered backward rules emit them — against central differences.
#include "backends/gradcheck.h"
#include "ir/op_registry.h"

namespace trident::testing {
namespace {

using ir::Attrs;

// The nodes op `op`'s backward rule emits for a node over inputs of `shapes`: one per input,
// each as (op, attributes), checked to read the output gradient alone.
std::vector<ir::Node> backward_nodes(const std::string& op, const std::vector<Shape>& shapes, const Attrs& a) {
  ir::Graph g;
  std::vector<int> in;
  for (size_t i = 0; i < shapes.size(); ++i) in.push_back(g.add_input("x" + std::to_string(i), shapes[i], DType::f64));
  const int y = g.add_node1(op, in, a, "fwd");
  const int dy = g.add_input("dy", g.value(y).shape, DType::f64);
  const ir::Node fwd = g.node(g.value(y).producer);  // a copy, as autodiff passes: rules add nodes
  const auto dxs = ir::OpRegistry::get(op).backward(g, fwd, {dy});
  std::vector<ir::Node> out;
  for (int dx : dxs) {
    EXPECT_GE(dx, 0);
    const ir::Node& n = g.node(g.value(dx).producer);
    EXPECT_EQ(n.inputs, std::vector<int>{dy}) << n.op;
    out.push_back(n);
  }
  return out;
}

TEST(CpuRefPadSlice, PadWritesTheValueAroundTheInput) {
  HostTensor x = HostTensor::of({1, 2, 2, 1}, {1, 2, 3, 4}), y({1, 3, 3, 1}, DType::f64);
  run_op("pad2d", Attrs{{"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"value", 9.0}}, {&x}, {&y});
  expect_values(y, {9, 9, 9, 1, 2, 9, 3, 4, 9}, 0);
}

TEST(CpuRefPadSlice, NegativePadsCrop) {
  HostTensor x = HostTensor::of({1, 3, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
  HostTensor y({1, 2, 2, 2}, DType::f64);
  run_op("pad2d", Attrs{{"pads", std::vector<int64_t>{-1, 0, 0, -1}}}, {&x}, {&y});
  expect_values(y, {6, 7, 8, 9, 12, 13, 14, 15}, 0);
  HostTensor both({1, 3, 3, 2}, DType::f64);  // crop a column on the left, pad one on the right
  run_op("pad2d", Attrs{{"pads", std::vector<int64_t>{0, -1, 0, 1}}, {"value", -1.0}}, {&x}, {&both});
  expect_values(both, {2, 3, 4, 5, -1, -1, 8, 9, 10, 11, -1, -1, 14, 15, 16, 17, -1, -1}, 0);
}

TEST(CpuRefPadSlice, ChannelSliceCutsAndPlacesWithZeros) {
  HostTensor x = HostTensor::of({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor cut({2, 2}, DType::f64), placed({2, 6}, DType::f64), edge({2, 3}, DType::f64);
  run_op("channel_slice", Attrs{{"start", int64_t{1}}, {"channels", int64_t{2}}}, {&x}, {&cut});
  expect_values(cut, {2, 3, 6, 7}, 0);
  run_op("channel_slice", Attrs{{"start", int64_t{-1}}, {"channels", int64_t{6}}}, {&x}, {&placed});
  expect_values(placed, {0, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 0}, 0);
  run_op("channel_slice", Attrs{{"start", int64_t{2}}, {"channels", int64_t{3}}}, {&x}, {&edge});
  expect_values(edge, {3, 4, 0, 7, 8, 0}, 0);
}

TEST(CpuRefPadSlice, ShapesThatLeaveNothingAreRefusedByName) {
  ir::Graph g;
  const int x = g.add_input("x", {1, 4, 4, 8});
  try {
    g.add_node1("pad2d", {x}, {{"pads", std::vector<int64_t>{-2, 0, -2, 0}}}, "crop_all");
    FAIL() << "a crop of every row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("crop_all"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("crop all"), std::string::npos) << e.what();
  }
  try {
    g.add_node1("channel_slice", {x}, {{"start", int64_t{8}}, {"channels", int64_t{2}}}, "past_the_end");
    FAIL() << "a slice past the channels was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("misses all of the input's 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_node1("pad2d", {x}, {{"pads", std::vector<int64_t>{1, 1}}}), Error);
  EXPECT_THROW(g.add_node1("channel_slice", {x}, {{"start", int64_t{0}}, {"channels", int64_t{0}}}), Error);
}

// L = Σ G·op(x); ∂L/∂x from the node the backward rule emits, against central differences.
void check_gradient(const std::string& op, const Shape& xs, const Attrs& a) {
  SCOPED_TRACE(op + " " + a.to_string());
  std::mt19937 rng(17);
  ir::Graph probe;
  const Shape ys = probe.value(probe.add_node1(op, {probe.add_input("x", xs, DType::f64)}, a)).shape;
  HostTensor x = random_tensor(xs, rng), g = random_tensor(ys, rng);
  auto loss = [&] {
    HostTensor y(ys, DType::f64);
    run_op(op, a, {&x}, {&y});
    return weighted_sum(g, y);
  };
  const ir::Node back = backward_nodes(op, {xs}, a).at(0);
  EXPECT_EQ(back.op, op) << "the backward is the op itself";
  HostTensor dx(xs, DType::f64);
  run_op(back.op, back.attrs, {&g}, {&dx});
  EXPECT_EQ(expect_gradient(x, dx, loss, "dx"), x.numel());
}

TEST(CpuRefPadSlice, PadGradientIsTheCrop) {
  for (const std::vector<int64_t>& p : {std::vector<int64_t>{1, 2, 0, 3}, {-1, 0, -2, -1}, {1, -2, -1, 2}})
    for (double value : {0.0, 1.5}) check_gradient("pad2d", {2, 5, 6, 3}, Attrs{{"pads", p}, {"value", value}});
}

TEST(CpuRefPadSlice, ChannelSliceGradientIsThePlacement) {
  for (auto [start, channels] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {2, 5}, {4, 4}, {-2, 6}, {-3, 13}})
    check_gradient("channel_slice", {2, 3, 2, 7}, Attrs{{"start", start}, {"channels", channels}});
}

TEST(CpuRefPadSlice, ConcatGradientSlicesEachInputsChannels) {
  std::mt19937 rng(23);
  const std::vector<Shape> xs{{2, 3, 3, 2}, {2, 3, 3, 5}, {2, 3, 3, 1}};
  const Shape ys{2, 3, 3, 8};
  std::vector<HostTensor> x;
  for (const Shape& s : xs) x.push_back(random_tensor(s, rng));
  HostTensor g = random_tensor(ys, rng);
  auto loss = [&] {
    HostTensor y(ys, DType::f64);
    run_op("concat", {}, {&x[0], &x[1], &x[2]}, {&y});
    return weighted_sum(g, y);
  };
  const std::vector<ir::Node> back = backward_nodes("concat", xs, {});
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].op, "channel_slice");
    HostTensor dx(xs[i], DType::f64);
    run_op(back[i].op, back[i].attrs, {&g}, {&dx});
    EXPECT_EQ(expect_gradient(x[i], dx, loss, "dx" + std::to_string(i)), x[i].numel());
  }
}

}  // namespace
}  // namespace trident::testing
