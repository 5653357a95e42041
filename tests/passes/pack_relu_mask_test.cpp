// pack_relu_mask and the packed ReLU mask, in three layers: structural (every cbr/cbar of a
// ResNet keeps a mask and its backward reads it), negative (channel counts that do not fill
// mask bytes keep y, with the reason), numerical (the mask op's bits, the fused ops with a
// mask against their decomposition, and whole training steps with and without the pass, bit
// for bit on the reference backend).
#include <gtest/gtest.h>


#include "core/relu_mask.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

std::unique_ptr<runtime::Executable> compile_resnet(bool mask) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {.batch = 2});
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.relu_bit_mask = mask ? 1 : 0;
  return runtime::Executable::compile(model, opt);
}

int masked_backwards(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order()) {
    const ir::Node& node = g.node(id);
    n += node.op == "batchnorm_relu_backward" && g.value(node.inputs[0]).dtype == DType::i32;
  }
  return n;
}

}  // namespace

TEST(PackReluMask, TheMaskHoldsTheSignOfEveryChannelAndZeroPadding) {
  ir::Graph g;
  const Shape s{2, 1, 1, 40};  // two words a row, the second one 8 channels full
  const int y = g.add_input("y", s);
  const int mask = g.add_node1("relu_mask", {y}, {}, "mask");
  ASSERT_EQ(g.value(mask).shape, (Shape{2, 1, 1, 2}));
  ASSERT_EQ(g.value(mask).dtype, DType::i32);
  test_support::GraphRunner r(g, "cpu_ref");
  TensorView yv = r.view(y);
  for (int64_t i = 0; i < yv.numel(); ++i) yv.as<float>()[i] = (i % 3 == 0) ? 1.f : (i % 3 == 1 ? -1.f : 0.f);
  r.run();
  const auto* words = r.view(mask).as<uint32_t>();
  for (int64_t row = 0; row < 2; ++row)
    for (int64_t c = 0; c < 64; ++c) {
      const bool bit = (words[row * 2 + c / 32] >> (c % 32)) & 1u;
      const bool expected = c < 40 && (row * 40 + c) % 3 == 0;
      EXPECT_EQ(bit, expected) << "row " << row << " channel " << c;
    }
}

TEST(PackReluMask, EveryResNetCbrKeepsAMaskThatItsBackwardReads) {
  auto masked = compile_resnet(true);
  auto plain = compile_resnet(false);
  const ir::Graph& g = masked->graph();
  const int fused = count_op(g, "cbr") + count_op(g, "cbar");
  ASSERT_GT(fused, 0);
  for (int id : g.order())
    if (g.node(id).op == "cbr" || g.node(id).op == "cbar") {
      EXPECT_EQ(g.node(id).outputs.size(), 7u) << g.node(id).name;
    }
  EXPECT_EQ(masked_backwards(g), fused);
  EXPECT_EQ(masked_backwards(plain->graph()), 0);
}

TEST(PackReluMask, ChannelsThatDoNotFillAByteKeepYWithTheReason) {
  ir::Graph g;
  {
    frontend::Builder b(g);
    const int x = b.input("images", {2, 6, 6, 3});
    g.mark_output(b.cbr(x, 6, 3, 1, 1, "odd"));
  }
  passes::CompileOptions opt;
  passes::PassContext ctx(opt);
  passes::fuse_conv_bn_relu(g, ctx);
  ctx.rejections.clear();
  passes::pack_relu_mask(g, ctx);
  ir::verify(g);
  for (int id : g.order())
    if (g.node(id).op == "cbr") {
      EXPECT_EQ(g.node(id).outputs.size(), 6u);
    }
  ASSERT_EQ(ctx.rejections.size(), 1u);
  EXPECT_NE(ctx.rejections[0].reason.find("multiple of 8"), std::string::npos) << ctx.rejections[0].reason;
}

// cbr/cbar with a mask, and the backward reading it, against their decompositions.
TEST(PackReluMask, FusedOpsWithAMaskEqualTheirDecomposition) {
  for (const std::string op : {"cbr", "cbar"})
    for (DType d : {DType::f64, DType::f32}) {
      SCOPED_TRACE(op + " " + std::string(dtype_name(d)));
      ir::Graph g;
      const Shape x_shape{3, 7, 6, 4}, y_shape{3, 4, 3, 16};
      std::vector<int> in{g.add_input("x", x_shape, d), g.add_parameter("w", {16, 3, 3, 4}, {}, d)};
      for (const char* n : {"gamma", "beta", "running_mean", "running_var"}) in.push_back(g.add_parameter(n, {16}, {}, d));
      if (op == "cbar") in.push_back(g.add_input("residual", y_shape, d));
      const std::vector<int> f = g.add_node(op, in,
                                            {{"stride", Shape{2, 2}}, {"padding", Shape{1, 1}}, {"eps", 1e-5},
                                             {"momentum", 0.1}, {"relu_mask", int64_t{1}}},
                                            "fused");
      ASSERT_EQ(f.size(), 7u);
      const int dy = g.add_input("dy", y_shape, d);
      const std::vector<int> b =
          g.add_node("batchnorm_relu_backward", {f[6], dy, f[1], in[2], f[2], f[3]},
                     {{"eps", 1e-5}, {"residual", int64_t{op == "cbar"}}}, "bwd");
      ir::Graph dec = g;
      dec.set_order({});
      std::vector<int> dec_out = ir::OpRegistry::get(op).decompose(dec, g.node(g.value(f[0]).producer));
      ir::Node bwd = g.node(g.value(b[0]).producer);
      bwd.inputs[0] = dec_out[6];
      bwd.inputs[2] = dec_out[1];
      bwd.inputs[4] = dec_out[2];
      bwd.inputs[5] = dec_out[3];
      const std::vector<int> dec_b = ir::OpRegistry::get(bwd.op).decompose(dec, bwd);
      test_support::GraphRunner rf(g, "cpu_ref"), rd(dec, "cpu_ref");
      rf.randomize(9);
      rd.randomize(9);
      rf.run();
      rd.run();
      for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(rf.values(f[i]), rd.values(dec_out[i])) << "forward output " << i;
      for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(rf.values(b[i]), rd.values(dec_b[i])) << "backward output " << i;
    }
}

TEST(PackReluMask, TrainingStepsEqualTheStepsWithoutMasksBitForBit) {
  auto masked = compile_resnet(true);
  auto plain = compile_resnet(false);
  ASSERT_GT(masked_backwards(masked->graph()), 0);
  test_support::expect_bitwise_same_steps(*masked, *plain, 2, 10);
}
