// ConvStages (ops/conv_stages.h), the one reading of a fused convolution's stages: every form
// the passes build — cbr with bias and bit mask, ReLU6's clipped cbr, cbar with a deferred
// input affine and a residual affine, conv_bn_stats with a cancelled bias and an exact affine,
// and the inference epilogue — gives the stages its decomposition runs, in order, and a plain
// conv2d is refused in one sentence. `trident explain` lists each fused convolution with them,
// and each fused batchnorm backward with its stages.
#include <gtest/gtest.h>

#include "core/error.h"
#include "frontend/builder.h"
#include "ops/conv_stages.h"
#include "runtime/fusion_report.h"

namespace trident {
namespace {

using ops::ConvStages;

ir::Node node(const std::string& op, size_t inputs, ir::Attrs attrs = {}) {
  ir::Node n;
  n.op = op;
  n.name = "layer";
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(static_cast<int>(i));
  return n;
}

TEST(ConvStages, CbrWithBiasAndBitMask) {
  const ConvStages s = ConvStages::of(node("cbr", 7, {{"relu_mask", int64_t{1}}}));
  EXPECT_TRUE(s.bias);
  EXPECT_FALSE(s.bias_cancelled);
  EXPECT_TRUE(s.batch_statistics && s.apply_affine && s.relu && s.bit_mask);
  EXPECT_FALSE(s.input_affine || s.clipped);
  EXPECT_EQ(s.residual, ConvStages::Residual::none);
  EXPECT_EQ(s.describe(), "conv → bias → batch statistics → affine → relu → bit mask");
}

TEST(ConvStages, ClippedCbrIsReluSix) {
  const ConvStages s = ConvStages::of(node("cbr", 6, {{"relu_max", 6.0}}));
  EXPECT_TRUE(s.clipped);
  EXPECT_EQ(s.relu_max, 6.0);
  EXPECT_FALSE(s.bias);
  EXPECT_EQ(s.describe(), "conv → batch statistics → affine → clip(0, 6)");
}

TEST(ConvStages, CbarWithInputAffineAndResidualAffine) {
  // x, w, gamma, beta, running_mean, running_var, residual, x_affine, residual_affine
  const ConvStages s =
      ConvStages::of(node("cbar", 9, {{"prologue", int64_t{1}}, {"residual_affine", int64_t{1}}}));
  EXPECT_TRUE(s.input_affine);
  EXPECT_FALSE(s.bias);
  EXPECT_EQ(s.residual, ConvStages::Residual::with_affine);
  EXPECT_EQ(s.describe(), "input affine+relu → conv → batch statistics → affine → add residual·affine → relu");
  EXPECT_EQ(ConvStages::of(node("cbar", 7)).residual, ConvStages::Residual::plain);
}

TEST(ConvStages, StatisticsOnlyStopsAtTheAffine) {
  const ConvStages s =
      ConvStages::of(node("conv_bn_stats", 7, {{"bias_cancelled", int64_t{1}}, {"exact_affine", int64_t{1}}}));
  EXPECT_TRUE(s.batch_statistics);
  EXPECT_FALSE(s.apply_affine || s.relu || s.bit_mask);
  EXPECT_TRUE(s.bias && s.bias_cancelled && s.exact_affine);
  EXPECT_EQ(s.describe(), "conv → bias (cancelled by the batch mean) → batch statistics → exact affine out");
}

TEST(ConvStages, InferenceEpilogue) {
  const ConvStages s = ConvStages::of(
      node("conv2d_epilogue", 4, {{"has_bias", int64_t{1}}, {"residual", int64_t{1}}, {"relu", int64_t{1}}}));
  EXPECT_TRUE(s.bias && s.relu);
  EXPECT_FALSE(s.batch_statistics || s.apply_affine);
  EXPECT_EQ(s.residual, ConvStages::Residual::plain);
  EXPECT_EQ(s.describe(), "conv → bias → add residual → relu");
  EXPECT_EQ(ConvStages::of(node("conv2d_epilogue", 2, {{"relu", int64_t{1}}, {"relu_max", 6.0}})).describe(),
            "conv → clip(0, 6)");
}

TEST(ConvStages, APlainConvolutionIsNoFusedConvolution) {
  EXPECT_FALSE(ConvStages::is_fused_convolution("conv2d"));
  try {
    ConvStages::of(node("conv2d", 2));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'layer' (conv2d) is not a fused convolution");
  }
}

TEST(ConvStages, ExplainListsEachFusedConvolutionWithItsStages) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {2, 6, 6, 3});
  const int stem = b.cbr(x, 8, 3, 1, 1, "stem");
  const int block = b.relu(b.add(b.batchnorm(b.conv(stem, 8, 3, 1, 1, {}, "conv2"), "bn2"), stem, "add"), "relu2");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(block)), 4, true, "fc"));
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  const runtime::FusionReport r = runtime::explain("block", g, o);
  const nlohmann::json j = runtime::report_json(r);
  ASSERT_EQ(j["fused_convolutions"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["fused_convolutions"][1]["op"], "cbar");
  EXPECT_EQ(j["fused_convolutions"][1]["stages"], "conv → batch statistics → affine → add residual → relu");
  const std::string text = runtime::report_text(r);
  EXPECT_NE(text.find("fused convolutions and their stages (2):"), std::string::npos) << text;
  // ...and each fused batchnorm backward with its own (ops/bn_relu_backward_stages.h); the block
  // end's also gives the residual's gradient.
  ASSERT_EQ(j["fused_batchnorm_backwards"].size(), 2u) << j.dump(2);
  int residual = 0;
  for (const auto& entry : j["fused_batchnorm_backwards"]) {
    const std::string stages = entry["stages"];
    EXPECT_NE(stages.find("→ batchnorm backward"), std::string::npos) << stages;
    residual += stages.find("→ dresidual") != std::string::npos;
  }
  EXPECT_EQ(residual, 1) << j.dump(2);
  EXPECT_NE(text.find("fused batchnorm backwards and their stages (2):"), std::string::npos) << text;
}

}  // namespace
}  // namespace trident
