// Shape inference and attribute validation of every forward op, through the graph builder.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/graph.h"

using namespace trident;
using ir::Attrs;

namespace {
std::vector<int64_t> v2(int64_t a, int64_t b) { return {a, b}; }
}  // namespace

TEST(ShapeInference, Conv2dStridePadDilationGroups) {
  ir::Graph g;
  int x = g.add_input("x", {2, 9, 11, 4});
  int w = g.add_parameter("w", {6, 3, 3, 2}, {});
  int b = g.add_parameter("b", {6}, {});
  int y = g.add_node1("conv2d", {x, w, b},
                      {{"stride", v2(2, 1)}, {"padding", v2(1, 0)}, {"dilation", v2(1, 2)}, {"groups", int64_t{2}}});
  // H: (9 + 2 - 3)/2 + 1 = 5; W: (11 - 5)/1 + 1 = 7.
  EXPECT_EQ(g.value(y).shape, (Shape{2, 5, 7, 6}));
}

TEST(ShapeInference, Conv2dRejectsChannelMismatchNamingTheNode) {
  ir::Graph g;
  int x = g.add_input("x", {1, 8, 8, 3});
  int w = g.add_parameter("w", {4, 3, 3, 5}, {});
  try {
    g.add_node1("conv2d", {x, w}, {}, "stem");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stem"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input channels"), std::string::npos) << e.what();
  }
}

TEST(ShapeInference, Conv2dRejectsWindowLargerThanInput) {
  ir::Graph g;
  int x = g.add_input("x", {1, 2, 2, 1});
  int w = g.add_parameter("w", {1, 5, 5, 1}, {});
  EXPECT_THROW(g.add_node1("conv2d", {x, w}, {}), Error);
}

TEST(ShapeInference, BatchNormTrainingHasFiveOutputsInferenceOne) {
  ir::Graph g;
  int x = g.add_input("x", {2, 3, 3, 4});
  std::vector<int> in{x};
  for (const char* n : {"g", "b", "m", "v"}) in.push_back(g.add_parameter(n, {4}, {}));
  auto train = g.add_node("batchnorm2d", in, {{"training", int64_t{1}}});
  ASSERT_EQ(train.size(), 5u);
  EXPECT_EQ(g.value(train[0]).shape, (Shape{2, 3, 3, 4}));
  EXPECT_EQ(g.value(train[1]).shape, (Shape{4}));
  auto infer = g.add_node("batchnorm2d", in, {{"training", int64_t{0}}});
  EXPECT_EQ(infer.size(), 1u);
  int bad = g.add_parameter("bad", {3}, {});
  EXPECT_THROW(g.add_node("batchnorm2d", {x, bad, in[2], in[3], in[4]}, {}), Error);
  EXPECT_THROW(g.add_node("batchnorm2d", in, {{"eps", -1.0}}), Error);
}

TEST(ShapeInference, Pooling) {
  ir::Graph g;
  int x = g.add_input("x", {1, 7, 7, 3});
  int m = g.add_node1("maxpool2d", {x}, {{"kernel", v2(3, 3)}, {"stride", v2(2, 2)}, {"padding", v2(1, 1)}});
  EXPECT_EQ(g.value(m).shape, (Shape{1, 4, 4, 3}));
  int a = g.add_node1("avgpool2d", {x}, {{"kernel", v2(2, 2)}});  // stride defaults to kernel
  EXPECT_EQ(g.value(a).shape, (Shape{1, 3, 3, 3}));
  int gap = g.add_node1("global_avgpool", {x}, {});
  EXPECT_EQ(g.value(gap).shape, (Shape{1, 1, 1, 3}));
  EXPECT_THROW(g.add_node1("maxpool2d", {x}, {{"kernel", v2(2, 2)}, {"padding", v2(2, 2)}}), Error);
  EXPECT_THROW(g.add_node1("maxpool2d", {x}, {}), Error);  // kernel missing
}

// ceil_mode (ONNX, PyTorch): the extent rounds up, unless the last window would start in the
// right padding; average pooling refuses it.
TEST(ShapeInference, MaxPoolCeilMode) {
  ir::Graph g;
  const int x6 = g.add_input("x6", {1, 6, 6, 2}), x5 = g.add_input("x5", {1, 5, 5, 2});
  const ir::Attrs k3s2{{"kernel", v2(3, 3)}, {"stride", v2(2, 2)}, {"ceil_mode", int64_t{1}}};
  EXPECT_EQ(g.value(g.add_node1("maxpool2d", {x6}, k3s2)).shape, (Shape{1, 3, 3, 2}));  // floor: 2
  const ir::Attrs k2s2p1{{"kernel", v2(2, 2)}, {"stride", v2(2, 2)}, {"padding", v2(1, 1)}, {"ceil_mode", int64_t{1}}};
  EXPECT_EQ(g.value(g.add_node1("maxpool2d", {x5}, k2s2p1)).shape, (Shape{1, 3, 3, 2}));  // the 4th would start at 6
  EXPECT_THROW(g.add_node1("avgpool2d", {x6}, k3s2), Error);
}

TEST(ShapeInference, FlattenLinearLoss) {
  ir::Graph g;
  int x = g.add_input("x", {5, 2, 3, 4});
  int f = g.add_node1("flatten", {x}, {});
  EXPECT_EQ(g.value(f).shape, (Shape{5, 24}));
  int w = g.add_parameter("w", {10, 24}, {});
  int y = g.add_node1("linear", {f, w}, {});
  EXPECT_EQ(g.value(y).shape, (Shape{5, 10}));
  int labels = g.add_input("labels", {5}, DType::i32);
  int loss = g.add_node1("softmax_cross_entropy", {y, labels}, {});
  EXPECT_EQ(g.value(loss).shape, (Shape{1}));
  int wrong = g.add_input("wrong", {5}, DType::f32);
  EXPECT_THROW(g.add_node1("softmax_cross_entropy", {y, wrong}, {}), Error);
  int w2 = g.add_parameter("w2", {10, 23}, {});
  EXPECT_THROW(g.add_node1("linear", {f, w2}, {}), Error);
}

TEST(ShapeInference, AddNeedsEqualShapesAndArityIsChecked) {
  ir::Graph g;
  int a = g.add_input("a", {2, 3});
  int b = g.add_input("b", {3, 2});
  EXPECT_THROW(g.add_node1("add", {a, b}, {}), Error);
  EXPECT_THROW(g.add_node1("relu", {a, a}, {}), Error);
  EXPECT_THROW(g.add_node1("no_such_op", {a}, {}), Error);
  int r = g.add_node1("reshape", {a}, {{"shape", Shape{6}}});
  EXPECT_EQ(g.value(r).shape, (Shape{6}));
  EXPECT_THROW(g.add_node1("reshape", {a}, {{"shape", Shape{7}}}), Error);
}

// Element counts are checked as the product accumulates: a shape whose count would wrap (here
// 2^90, which wraps to 0) is refused naming the value, and so is a node whose output would.
TEST(ShapeInference, HugeExtentsAreRefusedBeforeAnyCountWraps) {
  ir::Graph g;
  const int64_t big = int64_t{1} << 30;
  try {
    g.add_input("huge", {big, big, big, 1});
    FAIL() << "accepted a tensor of 2^90 elements";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'huge'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2^40 elements"), std::string::npos) << e.what();
  }
  int x = g.add_input("x", {int64_t{1} << 22, 1, 1, 1});
  int w = g.add_parameter("w", {1, 2, 2, 1}, {});
  try {
    g.add_node1("conv2d", {x, w}, {{"padding", v2(int64_t{1} << 20, int64_t{1} << 20)}}, "wide");
    FAIL() << "accepted a conv output of 2^64 elements";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wide"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2^40 elements"), std::string::npos) << e.what();
  }
  // Attributes so large that the window arithmetic itself would overflow.
  try {
    g.add_node1("conv2d", {x, w}, {{"padding", v2(INT64_MAX - 1, 0)}}, "padded");
    FAIL() << "accepted a padding of 2^63 - 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("padded"), std::string::npos) << e.what();
  }
  // (2^42 + 1) * 2^22 wraps to 2^22, x's own count.
  EXPECT_THROW(g.add_node1("reshape", {x}, {{"shape", std::vector<int64_t>{(int64_t{1} << 42) + 1, int64_t{1} << 22}}}),
               Error);
}
