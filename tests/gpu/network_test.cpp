// Whole networks on the cuda backend against cpu_ref: one full training step of a small ResNet
// (forward, backward, SGD with momentum; every parameter, momentum and running statistic after
// the step), the same step fused and unfused on the GPU, BN-folded inference against
// unfolded, a short training run whose loss falls, and a model that went out through ONNX and
// came back in as a user's PyTorch export does (fused for training, folded for inference).
// Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "frontend/model_source.h"
#include "frontend/onnx/onnx_export.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/trainer.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

using runtime::Executable;

std::unique_ptr<Executable> compile(const ir::Graph& model, const std::string& backend, passes::Mode mode,
                                    std::vector<std::string> disabled = {}, DType precision = DType::f32) {
  passes::CompileOptions opt;
  opt.mode = mode;
  opt.backend = backend;
  opt.precision = precision;
  opt.disabled_passes = std::move(disabled);
  auto exe = Executable::compile(model, opt);
  exe->init_parameters(42);
  return exe;
}

bool tf32_disabled() {
  const char* v = std::getenv("NVIDIA_TF32_OVERRIDE");
  return v && std::string(v) == "0";
}

// The same images, labels and learning rate in every executable.
void feed(Executable& exe, int64_t classes) {
  Rng rng(9);
  for (const char* name : {"images", "labels", "lr"}) {
    if (!exe.has(name)) continue;
    const int id = exe.value_id(name);
    TensorView t = exe.host_view(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % classes);
      else if (std::string(name) == "lr") t.as<float>()[i] = 0.05f;
      else t.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe.upload(id);
  }
}

std::vector<double> values_of(const Executable& exe, int id) {
  exe.download(id);
  TensorView t = exe.host_view(id);
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<float>()[i];
  return out;
}

// How close two executions of a whole network must be. Kernel tests (the other files here)
// hold each kernel to the tolerance table; whole networks cannot be held that tightly: a
// ReLU input within rounding of zero can fall on either side in two correct
// implementations, and in a batch-8 ResNet one such element moves the gradients of every
// earlier layer by ~0.5% (BatchNorm couples the channel). So a network is compared as a
// whole: its parameters, its running statistics and its gradients (momentum after the step)
// each as one vector, by relative L2 error, plus the loss and logits.
struct NetworkTolerance {
  double values;      // parameters, running statistics, loss, logits
  double gradients;   // all gradients together
};
NetworkTolerance network_tolerance(DType precision) {
  switch (precision) {
    case DType::f16: return {2e-2, 2e-1};
    case DType::bf16: return {5e-2, 4e-1};
    default: return {1e-3, 2e-2};  // f32 without TF32
  }
}

// Every parameter, running statistic and momentum buffer (after one step: the gradient), the
// loss and the logits of `a` against `b`. `row`: the precision of `a` (f32 with TF32 counts as f16).
void expect_same_step(const Executable& a, const Executable& b, DType row, const std::string& what) {
  const NetworkTolerance tol = network_tolerance(row);
  std::vector<double> pa, pb, sa, sb, ga, gb;
  for (int v = 0; v < a.graph().num_values(); ++v) {
    const ir::Value& val = a.graph().value(v);
    const bool persistent = val.role == ir::ValueRole::Parameter || val.role == ir::ValueRole::State;
    if (!persistent || !a.has(val.name) || !b.has(val.name) || val.name.rfind("amp.", 0) == 0) continue;
    const std::vector<double> x = values_of(a, v), y = values_of(b, b.value_id(val.name));
    const bool gradient = val.name.ends_with(".momentum");
    const bool stat = val.role == ir::ValueRole::State && !gradient;
    auto& to_a = gradient ? ga : stat ? sa : pa;
    auto& to_b = gradient ? gb : stat ? sb : pb;
    to_a.insert(to_a.end(), x.begin(), x.end());
    to_b.insert(to_b.end(), y.begin(), y.end());
  }
  test_support::expect_close_norm(pa, pb, tol.values, what + ": parameters");
  test_support::expect_close_norm(sa, sb, tol.values, what + ": running statistics");
  if (!ga.empty()) test_support::expect_close_norm(ga, gb, tol.gradients, what + ": gradients");
  if (a.loss() >= 0) test_support::expect_close_norm(values_of(a, a.loss()), values_of(b, b.loss()), tol.values, what + ": loss");
  test_support::expect_close_norm(values_of(a, a.logits()), values_of(b, b.logits()), tol.values, what + ": logits");
}

TEST(GpuNetwork, ResNetTrainingStepMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto gpu = compile(model, "cuda", passes::Mode::Train), ref = compile(model, "cpu_ref", passes::Mode::Train);
  // One step: a second step's forward would already see the first step's small differences,
  // and ReLU decisions near zero make those grow (see NetworkTolerance).
  for (Executable* e : {gpu.get(), ref.get()}) {
    feed(*e, 10);
    e->run();
  }
  gpu->synchronize();
  // fp32 on the GPU uses TF32 tensor cores unless NVIDIA_TF32_OVERRIDE=0 (bench/gpu_suite.sh
  // sets it for the tests): with it, the f32 row; with TF32, the f16 row.
  expect_same_step(*gpu, *ref, tf32_disabled() ? DType::f32 : DType::f16, "resnet_cifar train step");
}

// One forward+backward without the optimizer: every parameter gradient of the fused GPU
// graph, the unfused GPU graph and cpu_ref, so a failure names the first layer that differs.
TEST(GpuNetwork, EveryGradientOfOneStepMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  // Intermediate tensors start as NaN: a gradient that reads memory no kernel wrote fails.
  setenv("TRIDENT_POISON_ARENA", "1", 1);
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto build = [&](const std::string& backend, std::vector<std::string> disabled) {
    passes::CompileOptions opt;
    opt.backend = backend;
    opt.optimizer = false;
    opt.disabled_passes = std::move(disabled);
    auto exe = Executable::compile(model, opt);
    exe->init_parameters(42);
    feed(*exe, 10);
    exe->run();
    return exe;
  };
  auto fused = build("cuda", {}), unfused = build("cuda", {"fuse_conv_bn_relu"}), ref = build("cpu_ref", {});
  const DType row = tf32_disabled() ? DType::f32 : DType::f16;
  std::vector<double> f, u, r;
  for (auto [p, grad] : fused->param_grads()) {
    const std::string name = fused->graph().value(p).name;
    auto find_grad = [&](const Executable& e) {
      for (auto [q, gq] : e.param_grads())
        if (e.graph().value(q).name == name) return gq;
      return -1;
    };
    for (auto [to, from] : {std::pair{&f, values_of(*fused, grad)}, std::pair{&u, values_of(*unfused, find_grad(*unfused))},
                            std::pair{&r, values_of(*ref, find_grad(*ref))}})
      to->insert(to->end(), from.begin(), from.end());
  }
  test_support::expect_close_norm(f, r, network_tolerance(row).gradients, "fused cuda gradients");
  test_support::expect_close_norm(u, r, network_tolerance(row).gradients, "unfused cuda gradients");
  unsetenv("TRIDENT_POISON_ARENA");
}

// The forward tensors of every fused CBR/CBAR layer against the unfused layer's conv, BN and
// ReLU on the GPU: conv output, saved mean and inverse std, the activation, and how many ReLU
// mask bits (y > 0, which the backward uses) differ.
TEST(GpuNetwork, FusedForwardTensorsMatchUnfusedLayers) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto fused = compile(model, "cuda", passes::Mode::Train);
  auto unfused = compile(model, "cuda", passes::Mode::Train, {"fuse_conv_bn_relu", "fuse_elementwise"});
  for (Executable* e : {fused.get(), unfused.get()}) feed(*e, 10);
  const ir::Graph& fg = fused->graph();
  const ir::Graph& ug = unfused->graph();
  const std::vector<std::vector<int>> users = ug.users();
  auto consumer = [&](int v, const std::string& op) {
    for (int n : users[v])
      if (ug.node(n).op == op) return n;
    return -1;
  };
  for (int nid : fg.order()) {
    const ir::Node& n = fg.node(nid);
    if (n.op != "cbr" && n.op != "cbar") continue;
    const std::string w = fg.value(n.inputs[1]).name;
    int conv = -1;
    for (int u : ug.order())
      if (ug.node(u).op == "conv2d" && ug.value(ug.node(u).inputs[1]).name == w) conv = u;
    ASSERT_GE(conv, 0) << w;
    const int conv_out = ug.node(conv).outputs[0];
    const int bn = consumer(conv_out, "batchnorm2d");
    ASSERT_GE(bn, 0) << w;
    int z = ug.node(bn).outputs[0];
    if (n.op == "cbar") {
      const int add = consumer(z, "add");
      ASSERT_GE(add, 0) << w;
      z = ug.node(add).outputs[0];
    }
    const int relu = consumer(z, "relu");
    ASSERT_GE(relu, 0) << w;
    // Forward up to this layer in both (later nodes may reuse the memory of these tensors).
    fused->run_until(n.name);
    unfused->run_until(ug.node(relu).name);
    const DType row = tf32_disabled() ? DType::f32 : DType::f16;
    test_support::expect_close_norm(values_of(*fused, n.outputs[1]), values_of(*unfused, conv_out), row, n.name + " conv_out");
    test_support::expect_close_norm(values_of(*fused, n.outputs[2]), values_of(*unfused, ug.node(bn).outputs[1]), row,
                                    n.name + " saved_mean");
    test_support::expect_close_norm(values_of(*fused, n.outputs[3]), values_of(*unfused, ug.node(bn).outputs[2]), row,
                                    n.name + " saved_invstd");
    const std::vector<double> yf = values_of(*fused, n.outputs[0]), yu = values_of(*unfused, ug.node(relu).outputs[0]);
    test_support::expect_close_norm(yf, yu, row, n.name + " y");
    size_t flips = 0;
    for (size_t i = 0; i < yf.size(); ++i) flips += (yf[i] > 0) != (yu[i] > 0);
    EXPECT_LE(flips, yf.size() / 10000) << n.name << ": " << flips << " of " << yf.size() << " ReLU mask bits differ";
  }
}

namespace {

// One training step of resnet_cifar with the default passes against the step with `disabled`
// off, within the tolerance row; `rewritten` picks the nodes those passes made or changed, and
// the default graph must have some.
void expect_step_without(const std::vector<std::string>& disabled,
                         const std::function<bool(const ir::Graph&, const ir::Node&)>& rewritten,
                         const std::string& what, DType precision = DType::f32) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto with = compile(model, "cuda", passes::Mode::Train, {}, precision);
  auto without = compile(model, "cuda", passes::Mode::Train, disabled, precision);
  int count = 0;
  for (int id : with->graph().order()) count += rewritten(with->graph(), with->graph().node(id));
  EXPECT_GT(count, 0) << what;
  for (Executable* e : {with.get(), without.get()}) {
    feed(*e, 10);
    e->run();
  }
  expect_same_step(*with, *without, precision != DType::f32 ? precision : tf32_disabled() ? DType::f32 : DType::f16,
                   what);
}

}  // namespace

TEST(GpuNetwork, FusedTrainingStepMatchesUnfusedOnGpu) {
  TRIDENT_REQUIRE_GPU();
  expect_step_without({"fuse_conv_bn_relu", "fuse_elementwise"},
                      [](const ir::Graph&, const ir::Node& n) { return n.op == "cbr" || n.op == "cbar"; },
                      "fused vs unfused");
}

// fold_gradient_sum on the GPU: the cbar backwards that add the two gradients of a block
// output themselves give the step of the graph that writes the sum with an add kernel.
TEST(GpuNetwork, FoldedGradientSumsMatchTheUnfoldedStep) {
  TRIDENT_REQUIRE_GPU();
  expect_step_without({"fold_gradient_sum"},
                      [](const ir::Graph&, const ir::Node& n) {
                        return n.op == "batchnorm_relu_backward" && n.inputs.size() == 7;
                      },
                      "folded vs unfolded gradient sums");
}

// pack_relu_mask on the GPU (on by default there): the step whose backwards read 1-bit masks
// equals the step whose backwards read y.
TEST(GpuNetwork, PackedReluMasksGiveTheStepOfMasksFromY) {
  TRIDENT_REQUIRE_GPU();
  expect_step_without({"pack_relu_mask"},
                      [](const ir::Graph& g, const ir::Node& n) {
                        return n.op == "batchnorm_relu_backward" && g.value(n.inputs[0]).dtype == DType::i32;
                      },
                      "packed masks vs masks from y");
}

// defer_bn_apply on the GPU (on by default there): the step in which each basic block's first
// layer hands its affine to the second convolution (prologue forward and weight gradient, mask
// recomputed in the backward) equals the step that stores the first layer's output.
TEST(GpuNetwork, DeferredBatchnormApplyGivesTheStepThatStoresTheOutput) {
  TRIDENT_REQUIRE_GPU();
  for (DType precision : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(precision));
    expect_step_without({"defer_bn_apply"}, [](const ir::Graph&, const ir::Node& n) { return n.op == "conv_bn_stats"; },
                        "deferred vs stored batchnorm apply", precision);
  }
}

// group_weight_casts in mixed precision: one cast_group for the weights' copies and one for
// their gradients give the step of one cast per weight and per gradient.
TEST(GpuNetwork, GroupedWeightCastsGiveTheStepOfSingleCasts) {
  TRIDENT_REQUIRE_GPU();
  for (DType precision : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(precision));
    expect_step_without({"group_weight_casts"},
                        [](const ir::Graph&, const ir::Node& n) { return n.op == "cast_group"; },
                        "grouped vs single weight casts", precision);
  }
}

// Recorded steps (CUDA graphs) replay exactly the kernels a direct run enqueues: in f32 three
// training steps, recorded from the second on, equal three direct steps bit for bit (both
// with the heuristic plans, so the two executables run the same engines). In f16 two
// executables already differ in the last bits on their first (direct) step — some cuDNN
// engine of the f16 graphs adds in a varying order — so f16 compares parameters within the
// network tolerance.
// New weights (prepare) discard the recording; the next runs record again from them.
TEST(GpuNetwork, RecordedStepsEqualDirectStepsBitForBit) {
  TRIDENT_REQUIRE_GPU();
  for (const char* model_name : {"fmnist_cnn", "resnet_cifar"})
    for (DType precision : {DType::f32, DType::f16}) {
      const bool bitwise = precision == DType::f32;
      SCOPED_TRACE(std::string(model_name) + " " + std::string(dtype_name(precision)));
      const ir::Graph model = frontend::build_model(model_name, {8});
      auto build = [&](passes::Mode mode, bool graph) {
        passes::CompileOptions opt;
        opt.mode = mode;
        opt.backend = "cuda";
        opt.precision = precision;
        auto exe = Executable::compile(model, opt, {.autotune = false, .cuda_graph = graph});
        exe->init_parameters(42);
        feed(*exe, 10);
        return exe;
      };
      auto recorded = build(passes::Mode::Train, true), direct = build(passes::Mode::Train, false);
      for (int step = 0; step < (bitwise ? 3 : 2); ++step) {  // f16: differences grow with steps
        recorded->run();
        direct->run();
        if (!bitwise) continue;
        for (int v = 0; v < recorded->graph().num_values(); ++v) {
          const ir::Value& val = recorded->graph().value(v);
          if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
          if (!recorded->has(val.name) || val.dtype != DType::f32) continue;
          EXPECT_EQ(values_of(*recorded, v), values_of(*direct, direct->value_id(val.name)))
              << val.name << " after step " << step + 1 << (recorded->context().has_recording() ? " (recorded)" : "");
        }
        if (::testing::Test::HasFailure()) break;
      }
      EXPECT_TRUE(recorded->context().has_recording()) << "the step should have been recorded";
      EXPECT_FALSE(direct->context().has_recording());
      if (!bitwise)  // parameters only: gradients of a second f16 step already differ by ReLU flips
        for (const char* name : {"fc.weight", "fc.bias"})
          test_support::expect_close_norm(values_of(*recorded, recorded->value_id(name)),
                                          values_of(*direct, direct->value_id(name)), 2e-2, name);

      auto infer = build(passes::Mode::Infer, true);
      infer->run();
      infer->run();
      ASSERT_TRUE(infer->context().has_recording());
      infer->copy_weights_from(*recorded);  // the next run prepares: folded weights change, the recording goes
      infer->run();
      infer->run();
      auto fresh = build(passes::Mode::Infer, false);
      fresh->copy_weights_from(*recorded);
      fresh->run();
      if (bitwise) EXPECT_EQ(values_of(*infer, infer->logits()), values_of(*fresh, fresh->logits()));
      else test_support::expect_close_norm(values_of(*infer, infer->logits()), values_of(*fresh, fresh->logits()), 2e-2,
                                           "recorded vs direct f16 inference");
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(GpuNetwork, FoldedInferenceMatchesUnfoldedOnGpu) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  auto trained = compile(model, "cuda", passes::Mode::Train);
  feed(*trained, 10);
  trained->run();  // running statistics away from their initial values
  auto folded = compile(model, "cuda", passes::Mode::Infer);
  auto unfolded = compile(model, "cuda", passes::Mode::Infer, {"fold_bn", "fuse_conv_epilogue", "fuse_elementwise"});
  auto ref = compile(model, "cpu_ref", passes::Mode::Infer);
  for (Executable* e : {folded.get(), unfolded.get(), ref.get()}) {
    e->copy_weights_from(*trained);
    feed(*e, 10);
    e->run();
  }
  expect_same_step(*folded, *unfolded, DType::f16, "folded vs unfolded");
  expect_same_step(*folded, *ref, DType::f16, "folded on cuda vs cpu_ref");
}

// Mixed precision against the f32 reference: f16 and bf16 activations and weight copies,
// f32 master weights, statistics and loss, the loss scaled (f16) and unscaled in the update.
class GpuMixedPrecision : public ::testing::TestWithParam<DType> {};

TEST_P(GpuMixedPrecision, TrainingStepMatchesF32CpuRef) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto amp = compile(model, "cuda", passes::Mode::Train, {}, GetParam());
  auto ref = compile(model, "cpu_ref", passes::Mode::Train);
  for (Executable* e : {amp.get(), ref.get()}) {
    feed(*e, 10);
    e->run();
  }
  expect_same_step(*amp, *ref, GetParam(), std::string(dtype_name(GetParam())) + " step");
  if (GetParam() == DType::f16) {
    EXPECT_EQ(values_of(*amp, amp->value_id("amp.loss_scale"))[0], 65536.0) << "no overflow in a normal step";
    EXPECT_EQ(values_of(*amp, amp->value_id("amp.good_steps"))[0], 1.0);
  }
}

TEST_P(GpuMixedPrecision, InferenceMatchesF32CpuRef) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {4});
  auto amp = compile(model, "cuda", passes::Mode::Infer, {}, GetParam());
  auto ref = compile(model, "cpu_ref", passes::Mode::Infer);
  for (Executable* e : {amp.get(), ref.get()}) {
    feed(*e, 10);
    e->run();
  }
  expect_same_step(*amp, *ref, GetParam(), std::string(dtype_name(GetParam())) + " inference");
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuMixedPrecision, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GpuLossScaling, OverflowSkipsTheStepAndHalvesTheScale) {
  TRIDENT_REQUIRE_GPU();
  auto exe = compile(frontend::build_model("fmnist_cnn", {8}), "cuda", passes::Mode::Train, {}, DType::f16);
  feed(*exe, 10);
  const int images = exe->value_id("images");
  exe->host_view(images).as<float>()[3] = std::numeric_limits<float>::infinity();
  exe->upload(images);
  const int w = exe->value_id("fc.weight");
  const std::vector<double> before = values_of(*exe, w);
  exe->run();
  EXPECT_EQ(values_of(*exe, w), before) << "an overflowed step must leave the weights alone";
  EXPECT_EQ(values_of(*exe, exe->value_id("amp.loss_scale"))[0], 32768.0);
  feed(*exe, 10);  // a clean batch: the step happens and counts as good
  exe->run();
  EXPECT_NE(values_of(*exe, w), before);
  EXPECT_EQ(values_of(*exe, exe->value_id("amp.good_steps"))[0], 1.0);
}

TEST(GpuNetwork, LossFallsWhenTrainingOnGpu) {
  TRIDENT_REQUIRE_GPU();
  data::Dataset ds = data::make_synthetic(512, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.compile.backend = "cuda";
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {64}), cfg);
  data::BatchIterator it(ds, 64, true, 1, true);
  std::vector<double> losses;
  for (int e = 0; e < 4; ++e) losses.push_back(t.train_epoch(it, e, 4).loss);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
  EXPECT_GT(t.evaluate(ds).accuracy, 0.8);
}


// ResNet-18 on 32-pixel images: its last stage runs on 1×1 feature maps and its third on 2×2.
// Training it from an image folder in f16 or bf16 with recorded steps (CUDA graphs) and the
// data gradients on the side stream stayed at chance where direct steps learned. A loose
// comparison of a default (non-deterministic) recorded run with a direct one cannot tell a race
// from f16's run-to-run noise (a batchnorm bias's momentum differs by half between two honest
// runs), so both run with deterministic engines and must agree bit for bit after five steps:
// every parameter, momentum, running statistic and the loss scale. `side_stream` puts each
// data gradient beside its weight gradient, as --side-stream does.
void expect_recorded_steps_equal_direct_ones(bool side_stream) {
  const ir::Graph model = frontend::build_model("resnet18", {.batch = 64, .height = 32, .width = 32, .classes = 10});
  for (DType precision : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(precision));
    passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
    opt.backend = "cuda";
    opt.precision = precision;
    BackendOptions graphs{.side_stream = side_stream}, direct{.cuda_graph = false, .side_stream = side_stream};
    bool was_recorded = false;
    const auto recorded = test_support::train_deterministic_on_gpu(model, opt, 5, 10, graphs, &was_recorded);
    const auto stepped = test_support::train_deterministic_on_gpu(model, opt, 5, 10, direct);
    EXPECT_TRUE(was_recorded) << "the steps were not recorded as a CUDA graph";
    ASSERT_GT(recorded.size(), 100u);
    const int differing = test_support::differing_tensors(recorded, stepped);
    EXPECT_EQ(differing, 0) << differing << " of " << recorded.size() << " tensors differ after five steps";
  }
}

TEST(GpuNetwork, RecordedStepsTrainAResNet18OnSmallImagesAsDirectStepsDo) {
  TRIDENT_REQUIRE_GPU();
  expect_recorded_steps_equal_direct_ones(/*side_stream=*/false);
}

// The same with --side-stream: disabled while the race it shows is open (run it with
// --gtest_also_run_disabled_tests); the side stream is off by default until it passes.
TEST(GpuNetwork, DISABLED_RecordedStepsWithTheSideStreamTrainAResNet18AsDirectStepsDo) {
  TRIDENT_REQUIRE_GPU();
  expect_recorded_steps_equal_direct_ones(/*side_stream=*/true);
}

// The path of a PyTorch user's model through ONNX, in the build the GPU machine runs: resnet_cifar
// with trained running statistics written out by the exporter (BatchNormalization kept, and
// once folded), loaded back as `trident train --model FILE.onnx` loads it. The training import
// fuses as many Conv→BN→ReLU groups on the GPU as the zoo model and takes cpu_ref's step; the
// folded file infers on the GPU in f16 the logits of the unfolded one on cpu_ref.
TEST(GpuNetwork, AModelThroughOnnxTrainsFusedAndInfersFolded) {
  TRIDENT_REQUIRE_GPU();
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "this build has no ONNX import";
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto source = compile(model, "cpu_ref", passes::Mode::Train);
  feed(*source, 10);
  source->run();  // running statistics away from their initial values
  const std::filesystem::path dir = test_support::fresh_temp_dir("gpu_onnx");
  const std::string kept = (dir / "kept.onnx").string(), folded = (dir / "folded.onnx").string();
  frontend::export_onnx(model, source->export_weights(), {}, kept);
  frontend::OnnxExportOptions fold;
  fold.fold_bn = true;
  EXPECT_GT(frontend::export_onnx(model, source->export_weights(), fold, folded).folded_batchnorms, 0);

  auto load = [&](const std::string& path, passes::Mode mode, const std::string& backend, DType precision) {
    frontend::LoadedModel m = frontend::load_model(path, {8}, mode == passes::Mode::Train);
    auto exe = compile(m.graph, backend, mode, {}, precision);
    exe->import_weights(m.weights, false);
    feed(*exe, 10);
    return exe;
  };
  auto fused_count = [](const Executable& e) {
    int n = 0;
    for (int id : e.graph().order()) n += e.graph().node(id).op == "cbr" || e.graph().node(id).op == "cbar";
    return n;
  };
  auto zoo = compile(model, "cuda", passes::Mode::Train);
  auto gpu = load(kept, passes::Mode::Train, "cuda", DType::f32), ref = load(kept, passes::Mode::Train, "cpu_ref", DType::f32);
  EXPECT_GT(fused_count(*gpu), 0);
  EXPECT_EQ(fused_count(*gpu), fused_count(*zoo)) << "the imported model fuses as the zoo model does";
  for (Executable* e : {gpu.get(), ref.get()}) e->run();
  gpu->synchronize();
  expect_same_step(*gpu, *ref, tf32_disabled() ? DType::f32 : DType::f16, "ONNX import train step");

  auto infer_gpu = load(folded, passes::Mode::Infer, "cuda", DType::f16);
  auto infer_ref = load(kept, passes::Mode::Infer, "cpu_ref", DType::f32);
  for (Executable* e : {infer_gpu.get(), infer_ref.get()}) e->run();
  test_support::expect_close_norm(values_of(*infer_gpu, infer_gpu->logits()), values_of(*infer_ref, infer_ref->logits()),
                                  2e-2, "folded ONNX on cuda f16 vs unfolded on cpu_ref");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trident
