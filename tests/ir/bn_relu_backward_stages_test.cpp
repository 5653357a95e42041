// BnReluBackwardStages (ops/bn_relu_backward_stages.h), the one reading of a fused batchnorm
// backward: the mask kind comes from the mask operand's type (y, packed bits, affine), dy from
// the attributes and arity (plain, + dy_other, routed through a max pooling), the clip and the
// residual gradient from the attributes; another op is refused in one sentence. (`trident explain`
// lists them: tests/ir/conv_stages_test.cpp.)
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/bn_relu_backward_stages.h"

namespace trident {
namespace {

using ops::BnReluBackwardStages;
using Stages = BnReluBackwardStages;

// A graph whose values 0..6 are a mask of the given type and six [C] / NHWC placeholders.
struct Fixture {
  ir::Graph g;
  ir::Node n;
  Fixture(Shape mask_shape, DType mask_dtype, size_t inputs = 6, ir::Attrs attrs = {}) {
    n.op = "batchnorm_relu_backward";
    n.name = "layer";
    n.attrs = std::move(attrs);
    n.inputs.push_back(g.add_input("mask", std::move(mask_shape), mask_dtype));
    for (size_t i = 1; i < inputs; ++i) n.inputs.push_back(g.add_input("v" + std::to_string(i), {2, 4, 4, 8}));
  }
};

TEST(BnReluBackwardStages, ReluOutputMaskWithASecondGradientAndTheResidualsGradient) {
  Fixture f({2, 4, 4, 8}, DType::f32, 7, {{"residual", int64_t{1}}});
  const Stages s = Stages::of(f.n, f.g);
  EXPECT_EQ(s.mask, Stages::Mask::relu_output);
  EXPECT_EQ(s.dy, Stages::Dy::plus_other);
  EXPECT_TRUE(s.residual_gradient);
  EXPECT_FALSE(s.clipped);
  EXPECT_EQ(s.inputs(), 7u);
  EXPECT_EQ(s.outputs(), 4u);
  EXPECT_EQ(s.describe(), "dy + dy_other → relu mask (from y) → dresidual → batchnorm backward");
}

TEST(BnReluBackwardStages, PackedBitsAndAPooledGradient) {
  Fixture f({2, 4, 4, 1}, DType::i32, 7, {{"pooled_dy", int64_t{1}}});
  const Stages s = Stages::of(f.n, f.g);
  EXPECT_EQ(s.mask, Stages::Mask::bits);
  EXPECT_EQ(s.dy, Stages::Dy::pooled);
  EXPECT_EQ(s.outputs(), 3u);
  EXPECT_EQ(s.describe(), "dy routed through the max pooling → relu mask (packed bits) → batchnorm backward");
}

TEST(BnReluBackwardStages, AffineMaskAndAClippedRelu) {
  Fixture affine({2, 8}, DType::f32);
  EXPECT_EQ(Stages::of(affine.n, affine.g).mask, Stages::Mask::affine);
  EXPECT_EQ(Stages::of(affine.n, affine.g).dy, Stages::Dy::plain);
  Fixture clipped({2, 4, 4, 8}, DType::f32, 6, {{"relu_max", 6.0}});
  const Stages s = Stages::of(clipped.n, clipped.g);
  EXPECT_TRUE(s.clipped);
  EXPECT_EQ(s.relu_max, 6.0);
  EXPECT_EQ(s.describe(), "dy → clip mask 0 < y < 6 (from y) → batchnorm backward");
}

TEST(BnReluBackwardStages, AnotherOpIsRefusedInOneSentence) {
  Fixture f({2, 4, 4, 8}, DType::f32);
  f.n.op = "batchnorm2d_backward";
  try {
    Stages::of(f.n, f.g);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'layer' (batchnorm2d_backward) is not a fused batchnorm backward");
  }
}

}  // namespace
}  // namespace trident
