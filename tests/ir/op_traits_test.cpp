// The traits on OpDef that passes ask instead of keeping lists of op names, and the one
// reading of window attributes (ops/window.h) that shape inference and every backend share.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/op_registry.h"
#include "ops/window.h"

namespace trident {
namespace {

using ir::OpRegistry;

TEST(OpTraits, MixedPrecisionKeepsBatchnormParametersAndStatisticsF32) {
  const ir::OpDef& bn = OpRegistry::get("batchnorm2d");
  EXPECT_FALSE(bn.keeps_f32(0));  // x
  for (size_t i = 1; i < 5; ++i) EXPECT_TRUE(bn.keeps_f32(i)) << i;
  for (const char* op : {"cbr", "cbar", "conv_bn_stats"}) {
    const ir::OpDef& d = OpRegistry::get(op);
    EXPECT_FALSE(d.keeps_f32(0)) << op;  // x
    EXPECT_FALSE(d.keeps_f32(1)) << op;  // w
    for (size_t i = 2; i < 6; ++i) EXPECT_TRUE(d.keeps_f32(i)) << op << " input " << i;
    EXPECT_FALSE(d.keeps_f32(6)) << op;  // residual or bias: an activation or a conv operand
  }
  EXPECT_FALSE(OpRegistry::get("conv2d").keeps_f32(1));
}

TEST(OpTraits, FusionAndPaddingClassesComeFromTheOps) {
  EXPECT_TRUE(OpRegistry::get("relu").elementwise);
  EXPECT_TRUE(OpRegistry::get("add").elementwise);
  EXPECT_FALSE(OpRegistry::get("mul").elementwise);  // not a step of the elementwise programs
  for (const char* op : {"maxpool2d", "avgpool2d", "global_avgpool", "batchnorm2d", "softmax_cross_entropy"})
    EXPECT_TRUE(OpRegistry::get(op).reduction) << op;
  for (const char* op : {"conv2d", "conv2d_epilogue", "cbr", "cbar"})
    EXPECT_TRUE(OpRegistry::get(op).reads_conv_input) << op;
  EXPECT_FALSE(OpRegistry::get("linear").reads_conv_input);
  EXPECT_TRUE(OpRegistry::get("reshape").view);
}

TEST(OpTraits, AnF32InputMustHaveAFixedPosition) {
  ir::OpDef d;
  d.name = "test_f32_after_optional";
  d.inputs = {"x", "b?", "scale"};
  d.f32_inputs = {"scale"};  // after an optional input: its position depends on the node
  EXPECT_THROW(OpRegistry::add(d), Error);
  d.f32_inputs = {"b?"};  // the first optional input still sits at one place
  EXPECT_NO_THROW(OpRegistry::add(d));
  EXPECT_TRUE(OpRegistry::get(d.name).keeps_f32(1));
}

TEST(Window, ParsedOnceWithTheSameRulesForEveryReader) {
  ir::Attrs conv{{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1}}};
  EXPECT_EQ(ops::conv_output_shape(conv, {2, 9, 7, 4}, {8, 3, 3, 4}), (Shape{2, 5, 4, 8}));
  const ops::WindowGeom g = ops::conv_geometry(conv, {2, 9, 7, 4}, {8, 3, 3, 4}, {2, 5, 4, 8});
  EXPECT_EQ(g.pad, (ops::Pair{1, 1}));  // one integer means both axes
  EXPECT_EQ(g.R, 3);
  EXPECT_EQ(g.Cg, 4);
  // An output that disagrees with the attributes is a planner bug, said in one sentence.
  EXPECT_THROW(ops::conv_geometry(conv, {2, 9, 7, 4}, {8, 3, 3, 4}, {2, 4, 4, 8}), Error);

  ir::Attrs pool{{"kernel", std::vector<int64_t>{3, 3}}, {"count_include_pad", int64_t{0}}};
  const ops::Window w = ops::pool_window(pool);
  EXPECT_EQ(w.stride, (ops::Pair{3, 3}));  // the stride defaults to the kernel
  EXPECT_FALSE(w.count_include_pad);
  EXPECT_THROW(ops::pool_window({}), Error);  // no kernel
  EXPECT_THROW(ops::pool_window({{"kernel", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{2, 2}}}),
               Error);
  EXPECT_EQ(ops::conv_window_attrs({{"stride", std::vector<int64_t>{2, 2}}, {"eps", 1e-5}}).items().size(), 1u);
}

}  // namespace
}  // namespace trident
