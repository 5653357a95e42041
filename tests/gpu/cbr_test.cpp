// The cuda cbr and cbar kernels (conv + genstats graph or conv + channel sums, finalize,
// apply) against their registered decomposition (conv2d → batchnorm2d → [add] → relu) on
// cpu_ref: y, conv_out, the saved statistics and the running statistics updated in place,
// in f32 (TF32 allowed, so the f16 row) and f16, with and without conv bias, for 3×3, strided
// 1×1 and three-input-channel convolutions; re-runs are bitwise identical. The cross-layer
// forms of defer_bn_apply (prologue, conv_bn_stats, a residual through its affine, the weight
// gradient through the prologue) against theirs; a first layer's few input channels on
// trident's own convolution with statistics, in f16 and bf16. Every test skips, saying why,
// where there is no GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/relu_mask.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "support/gpu_compare.h"
#include "support/graph_runner.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/conv_forward.h"
#endif

namespace trident {
namespace {

using ir::Attrs;
using test_support::compare_with_cpu_ref;
using test_support::GraphRunner;

struct CbrCase {
  std::string name;
  Shape x, w;
  int64_t stride = 1, pad = 0;
};

std::vector<CbrCase> cbr_cases() {
  return {
      {"k3_pad1", {4, 8, 8, 16}, {32, 3, 3, 16}, 1, 1},
      {"k1_stride2", {4, 8, 8, 16}, {24, 1, 1, 16}, 2, 0},
      {"three_input_channels", {4, 8, 8, 3}, {16, 3, 3, 3}, 1, 1},
      // The layers of resnet_cifar at batch 8: per-channel reductions over 8192 and 512 rows.
      {"resnet_cifar_stage1", {8, 32, 32, 16}, {16, 3, 3, 16}, 1, 1},
      {"resnet_cifar_stage3", {8, 8, 8, 64}, {64, 3, 3, 64}, 1, 1},
  };
}

Shape output_shape(const CbrCase& c) {
  auto extent = [&](int64_t in, int64_t k) { return (in + 2 * c.pad - (k - 1) - 1) / c.stride + 1; };
  return {c.x[0], extent(c.x[1], c.w[1]), extent(c.x[2], c.w[2]), c.w[0]};
}

// A graph holding one cbr/cbar/conv_bn_stats node named "fused"; inputs x, w, gamma, beta,
// running_mean, running_var, [residual], [b], [x_affine (prologue)].
ir::Graph fused_graph(const std::string& op, const CbrCase& c, bool bias, DType dt, bool relu_mask = false,
                      bool prologue = false, bool residual_affine = false, bool bias_cancelled = false) {
  ir::Graph g;
  const Shape k{c.w[0]};
  std::vector<int> in{g.add_input("x", c.x, dt),
                      g.add_parameter("w", c.w, {}, dt),
                      g.add_parameter("gamma", k, {}, dt),
                      g.add_parameter("beta", k, {}, dt),
                      g.add_state("running_mean", k, {}, dt),
                      g.add_state("running_var", k, {}, dt)};
  if (op == "cbar") in.push_back(g.add_input("residual", output_shape(c), dt));
  if (bias) in.push_back(g.add_parameter("b", k, {}, dt));
  Attrs a{{"stride", std::vector<int64_t>{c.stride, c.stride}},
          {"padding", std::vector<int64_t>{c.pad, c.pad}},
          {"eps", 1e-5},
          {"momentum", 0.1}};
  if (relu_mask) a.set("relu_mask", int64_t{1});
  if (bias_cancelled) a.set("bias_cancelled", int64_t{1});
  if (prologue) {
    in.push_back(g.add_input("x_affine", {2, c.x[3]}));
    a.set("prologue", int64_t{1});
  }
  if (residual_affine) {
    in.push_back(g.add_input("residual_affine", {2, c.w[0]}));
    a.set("residual_affine", int64_t{1});
  }
  g.add_node(op, in, a, "fused");
  return g;
}

// The same graph with the fused node replaced by its registered decomposition, whose values
// take the fused outputs' names (so the comparison finds them).
ir::Graph decomposed_graph(const std::string& op, const CbrCase& c, bool bias, bool prologue = false,
                           bool residual_affine = false, bool bias_cancelled = false) {
  ir::Graph g = fused_graph(op, c, bias, DType::f32, false, prologue, residual_affine, bias_cancelled);
  const ir::Node fused = g.node(g.order().back());
  const std::vector<int> outs = ir::OpRegistry::get(op).decompose(g, fused);
  g.remove_from_order({fused.id});
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string name = g.value(fused.outputs[i]).name;
    g.value(fused.outputs[i]).name = name + ".unused";
    if (outs[i] != fused.outputs[i]) g.value(outs[i]).name = name;
  }
  return g;
}

// The outputs compared: the fused node's y, conv_out and saved statistics, and the running
// statistics (state, updated in place by both graphs).
std::vector<std::string> compared_values() {
  return {"fused.y", "fused.conv_out", "fused.saved_mean", "fused.saved_invstd", "running_mean", "running_var"};
}

#ifdef TRIDENT_HAVE_CUDA
std::string kernel_path(const ir::Graph& g, bool autotune = true) {
  auto ctx = KernelRegistry::make_context("cuda");
  ctx->set_kernel_options({.backend = {.autotune = autotune}});
  auto kernel = KernelRegistry::make("cuda", g.node(g.order().back()), g, *ctx);
  auto* report = dynamic_cast<cuda::ReportsPath*>(kernel.get());
  return report ? report->path() : "(kernel does not report its path)";
}
#endif

class GpuCbr : public ::testing::TestWithParam<std::tuple<std::string, CbrCase, DType>> {};

TEST_P(GpuCbr, MatchesDecompositionOnCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const auto& [op, c, dt] = GetParam();
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "with conv bias" : "without conv bias");
    const ir::Graph gpu = fused_graph(op, c, bias, dt);
#ifdef TRIDENT_HAVE_CUDA
    const std::string path = kernel_path(gpu);
    std::cout << op << " " << c.name << " " << dtype_name(dt) << (bias ? " +bias" : "") << ": " << path << "\n";
    RecordProperty(bias ? "path_with_bias" : "path", path);
#endif
    compare_with_cpu_ref(gpu, decomposed_graph(op, c, bias), compared_values(), DType::f16, 51);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuCbr,
                         ::testing::Combine(::testing::Values(std::string("cbr"), std::string("cbar")),
                                            ::testing::ValuesIn(cbr_cases()),
                                            ::testing::Values(DType::f32, DType::f16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param).name + "_" +
                                  std::string(dtype_name(std::get<2>(info.param)));
                         });

// The cross-layer forms (defer_bn_apply): cbr and cbar reading their input through the
// prologue relu(x·scale + shift), and conv_bn_stats, which stops at the statistics and
// outputs its affine, with and without a prologue of its own. Whichever path the kernel
// chose (cuDNN's prologue graph or the apply kernel first) must match the decomposition.
TEST_P(GpuCbr, CrossLayerFormsMatchTheirDecomposition) {
  TRIDENT_REQUIRE_GPU();
  const auto& [op, c, dt] = GetParam();
  for (const std::string& form : {op, std::string("conv_bn_stats")})
    for (bool prologue : {false, true}) {
      if (form != "conv_bn_stats" && !prologue) continue;
      SCOPED_TRACE(form + (prologue ? " with prologue" : ""));
      const ir::Graph gpu = fused_graph(form, c, false, dt, false, prologue);
#ifdef TRIDENT_HAVE_CUDA
      const std::string path = kernel_path(gpu);
      std::cout << form << (prologue ? "+prologue " : " ") << c.name << " " << dtype_name(dt) << ": " << path << "\n";
#endif
      std::vector<std::string> compared = compared_values();
      if (form == "conv_bn_stats") compared[0] = "fused.affine";
      compare_with_cpu_ref(gpu, decomposed_graph(form, c, false, prologue), compared, DType::f16, 54);
    }
  if (op == "cbar")
    for (bool mask : {false, true}) {
      // The block end of a projection shortcut: the residual is the shortcut's raw convolution
      // output, added through its batchnorm affine by the apply step (and its packed mask).
      if (mask && c.w[0] % 8 != 0) continue;
      SCOPED_TRACE(std::string("cbar with a residual affine") + (mask ? " and a packed mask" : ""));
      const ir::Graph gpu = fused_graph("cbar", c, false, dt, mask, false, true);
      compare_with_cpu_ref(gpu, decomposed_graph("cbar", c, false, false, true), compared_values(), DType::f16, 56);
    }
}

// A bias the batch mean cancels (passes/cancel_conv_bias.cpp), in every form: the convolution
// runs without it (so cuDNN's genstats and prologue graphs can serve the layer), conv_out and
// saved_mean exclude it, the running mean takes momentum·b.
TEST_P(GpuCbr, CancelledBiasMatchesItsDecomposition) {
  TRIDENT_REQUIRE_GPU();
  const auto& [op, c, dt] = GetParam();
  for (const std::string& form : {op, std::string("conv_bn_stats")})
    for (bool prologue : {false, true}) {
      SCOPED_TRACE(form + (prologue ? " with prologue" : "") + ", bias cancelled");
      const ir::Graph gpu = fused_graph(form, c, true, dt, false, prologue, false, true);
#ifdef TRIDENT_HAVE_CUDA
      const std::string path = kernel_path(gpu);
      std::cout << form << (prologue ? "+prologue " : " ") << c.name << " " << dtype_name(dt)
                << " cancelled bias: " << path << "\n";
      EXPECT_EQ(path.find("bias"), std::string::npos) << "the convolution must not add the cancelled bias: " << path;
#endif
      std::vector<std::string> compared = compared_values();
      if (form == "conv_bn_stats") compared[0] = "fused.affine";
      // The decomposition's running mean is the add after its batchnorm (running_mean + m·b),
      // a value of its own; the fused node writes it into the state in place.
      compared[4] = "fused.running_mean_out";
      compare_with_cpu_ref(gpu, decomposed_graph(form, c, true, prologue, false, true), compared, DType::f16, 57);
    }
}

// With relu_mask the apply step also writes the packed mask: its bits are exactly the signs of
// the y it wrote (and 0 past the last channel), y and the statistics still match the
// decomposition. Channel counts that are a multiple of 8 only (the pass's condition). f16 takes
// the 16-byte vector path, f32 the one-element-at-a-time path (cuDNN needs aligned pointers,
// so misaligned tensors cannot reach the apply step here).
TEST_P(GpuCbr, PackedMaskIsTheSignOfY) {
  TRIDENT_REQUIRE_GPU();
  const auto& [op, c, dt] = GetParam();
  if (c.w[0] % 8 != 0) GTEST_SKIP() << c.w[0] << " output channels do not fill mask bytes";
  const ir::Graph gpu = fused_graph(op, c, false, dt, true);
  GraphRunner r(gpu, "cuda");
  r.randomize(52);
  r.run();
  const int y = gpu.find_value("fused.y"), mask = gpu.find_value("fused.relu_mask");
  ASSERT_GE(mask, 0);
  const std::vector<double> yv = r.values(y);
  const auto* words = r.view(mask).as<uint32_t>();
  const int64_t C = c.w[0], words_per_row = relu_mask_words(C);
  size_t wrong = 0, padding = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / C, ch = static_cast<int64_t>(i) % C;
    wrong += (((words[row * words_per_row + ch / 32] >> (ch % 32)) & 1u) != 0) != (yv[i] > 0);
  }
  for (int64_t row = 0; row < static_cast<int64_t>(yv.size()) / C; ++row)
    for (int64_t ch = C; ch < words_per_row * 32; ++ch) padding += (words[row * words_per_row + ch / 32] >> (ch % 32)) & 1u;
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(padding, 0u);
  compare_with_cpu_ref(gpu, decomposed_graph(op, c, false), compared_values(), DType::f16, 53);
}

// Autotuning may pick either statistics path per shape (cuDNN's conv+genstats graph, or the
// plain convolution plus the channel-sums kernel); without autotuning f16 takes the graph.
// Both must match the decomposition.
TEST(GpuCbr, StatisticsPathsWithAndWithoutAutotuning) {
  TRIDENT_REQUIRE_GPU();
  for (bool tune : {false, true})
    for (const CbrCase& c : cbr_cases()) {
      SCOPED_TRACE(c.name + (tune ? " autotuned" : " heuristic plans"));
      const ir::Graph gpu = fused_graph("cbr", c, false, DType::f16);
#ifdef TRIDENT_HAVE_CUDA
      std::cout << "cbr " << c.name << (tune ? " autotuned: " : ": ") << kernel_path(gpu, tune) << "\n";
#endif
      compare_with_cpu_ref(gpu, decomposed_graph("cbr", c, false), compared_values(), DType::f16, 52,
                           [&](GraphRunner& r) { r.context().set_kernel_options({.backend = {.autotune = tune}}); });
    }
}

// Runs `g` (one fused node) three times on cuda from the draw `seed`: y, conv_out and the saved
// statistics, which do not depend on the running statistics every run updates, keep their bits.
void expect_bitwise_reruns(const ir::Graph& g, uint64_t seed, bool autotune = true) {
  GraphRunner runner(g, "cuda");
  runner.context().set_kernel_options({.backend = {.autotune = autotune}});
  runner.randomize(seed);
  const std::vector<int>& outs = g.node(g.order().back()).outputs;
  runner.run();
  std::vector<std::vector<std::byte>> first;
  for (int i = 0; i < 4; ++i) {
    TensorView t = runner.view(outs[i]);
    first.emplace_back(static_cast<std::byte*>(t.data), static_cast<std::byte*>(t.data) + t.bytes());
  }
  runner.run(2);
  for (int i = 0; i < 4; ++i) {
    TensorView t = runner.view(outs[i]);
    EXPECT_EQ(0, std::memcmp(first[i].data(), t.data, t.bytes())) << g.value(outs[i]).name << " changed on re-run";
  }
}

TEST(GpuCbrDeterminism, RerunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_bitwise_reruns(fused_graph("cbar", cbr_cases()[0], true, dt), 61);
  }
}

// A first layer's few input channels (the image padded to 4): trident's own convolution with
// statistics (device/small_channel_conv.h) instead of cuDNN, taken untimed wherever it applies —
// VGG's 3×3, ResNet's 7×7 stride-2 stem and a 1×1 of 8 channels into 128 (two channel tiles).
std::vector<CbrCase> first_layer_cases() {
  return {
      {"vgg_first_layer", {4, 16, 16, 4}, {64, 3, 3, 4}, 1, 1},
      {"resnet_stem", {2, 30, 30, 4}, {64, 7, 7, 4}, 2, 3},
      {"pointwise_k128", {3, 9, 9, 8}, {128, 1, 1, 8}, 1, 0},
  };
}

#ifdef TRIDENT_HAVE_CUDA
std::string untimed_path(const ir::Graph& g, bool small_channel_conv = true) {
  auto ctx = KernelRegistry::make_context("cuda");
  ctx->set_kernel_options({.backend = {.autotune = false, .small_channel_conv = small_channel_conv}});
  auto kernel = KernelRegistry::make("cuda", g.node(g.order().back()), g, *ctx);
  return dynamic_cast<cuda::ReportsPath&>(*kernel).path();
}
#endif

TEST(GpuCbrSmallChannel, FirstLayersTakeItAndMatchTheDecomposition) {
  TRIDENT_REQUIRE_GPU();
  for (const CbrCase& c : first_layer_cases())
    for (DType dt : {DType::f16, DType::bf16})
      for (const std::string form : {"cbr", "conv_bn_stats"})
        for (bool bias : {false, true}) {
          SCOPED_TRACE(form + " " + c.name + " " + std::string(dtype_name(dt)) + (bias ? " +bias" : ""));
          const ir::Graph gpu = fused_graph(form, c, bias, dt);
#ifdef TRIDENT_HAVE_CUDA
          const std::string path = untimed_path(gpu);
          EXPECT_NE(path.find("small-channel"), std::string::npos) << path;
#endif
          std::vector<std::string> compared = compared_values();
          if (form == "conv_bn_stats") compared[0] = "fused.affine";
          compare_with_cpu_ref(gpu, decomposed_graph(form, c, bias), compared, dt, 58, [](GraphRunner& r) {
            r.context().set_kernel_options({.backend = {.autotune = false}});
          });
        }
}

TEST(GpuCbrSmallChannel, OtherShapesAndTheOffSwitchKeepCuDnn) {
  TRIDENT_REQUIRE_GPU();
#ifdef TRIDENT_HAVE_CUDA
  const CbrCase first = first_layer_cases()[0];
  EXPECT_EQ(untimed_path(fused_graph("cbr", first, false, DType::f16), false).find("small-channel"), std::string::npos);
  EXPECT_EQ(untimed_path(fused_graph("cbr", first, false, DType::f32)).find("small-channel"), std::string::npos);
  EXPECT_EQ(untimed_path(fused_graph("cbr", cbr_cases()[0], false, DType::f16)).find("small-channel"), std::string::npos);
  EXPECT_EQ(untimed_path(fused_graph("cbr", first, false, DType::f16, false, true)).find("small-channel"),
            std::string::npos)
      << "a prologue's input is a raw convolution output, never a first layer's image";
#endif
}

TEST(GpuCbrSmallChannel, RerunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  expect_bitwise_reruns(fused_graph("cbr", first_layer_cases()[0], true, DType::f16), 62, false);
}

TEST(GpuCbrChecks, RejectsASingleValuePerChannel) {
  TRIDENT_REQUIRE_GPU();
  const CbrCase one{"one_pixel", {1, 1, 1, 8}, {8, 1, 1, 8}, 1, 0};
  const ir::Graph g = fused_graph("cbr", one, false, DType::f32);
  auto ctx = KernelRegistry::make_context("cuda");
  try {
    KernelRegistry::make("cuda", g.node(g.order().back()), g, *ctx);
    FAIL() << "a cbr over one value per channel must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused"), std::string::npos) << e.what();
  }
}

}  // namespace
// The weight gradient of a convolution whose input went through the prologue, recomputing
// that input (cuDNN's ConvBNwgrad graph or the apply kernel first), against its decomposition,
// for every shape in f32 and f16.
TEST(GpuCbrPrologue, WeightGradientMatchesItsDecomposition) {
  TRIDENT_REQUIRE_GPU();
  for (const CbrCase& c : cbr_cases())
    for (DType dt : {DType::f32, DType::f16}) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dt)));
      auto build = [&](DType d, bool decomposed) {
        ir::Graph g;
        const int x = g.add_input("x", c.x, d), dy = g.add_input("dy", output_shape(c), d);
        const int affine = g.add_input("x_affine", {2, c.x[3]});
        Attrs a{{"stride", std::vector<int64_t>{c.stride, c.stride}},
                {"padding", std::vector<int64_t>{c.pad, c.pad}},
                {"weight_shape", c.w},
                {"has_bias", int64_t{0}},
                {"prologue", int64_t{1}}};
        const std::vector<int> out = g.add_node("conv2d_backward_weight", {x, dy, affine}, a, "wgrad");
        if (!decomposed) return g;
        const ir::Node n = g.node(g.value(out[0]).producer);
        const std::vector<int> parts = ir::OpRegistry::get(n.op).decompose(g, n);
        g.remove_from_order({n.id});
        g.value(out[0]).name = "wgrad.unused";
        g.value(parts[0]).name = "wgrad";
        return g;
      };
      const ir::Graph gpu = build(dt, false);
#ifdef TRIDENT_HAVE_CUDA
      std::cout << "wgrad+prologue " << c.name << " " << dtype_name(dt) << ": " << kernel_path(gpu) << "\n";
#endif
      compare_with_cpu_ref(gpu, build(DType::f32, true), {"wgrad"}, DType::f16, 55);
    }
}

}  // namespace trident
