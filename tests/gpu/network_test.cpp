// Whole networks on the cuda backend against cpu_ref: one full training step of a small ResNet
// (forward, backward, SGD with momentum; every parameter, momentum and running statistic after
// the step), the same step fused and unfused on the GPU, BN-folded inference against
// unfolded, and a short training run whose loss falls. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/trainer.h"
#include "support/gpu_compare.h"

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

// Every parameter and state tensor (weights, BN running statistics, momentum, which after the
// first step is the gradient), the loss and the logits of `a` against `b`, each tensor by its
// relative L2 error. Element-wise checks would demand more than reduced-precision training
// promises: a step's gradients pass through every layer, and single elements move more.
void expect_same_step(const Executable& a, const Executable& b, DType row, const std::string& what) {
  for (int v = 0; v < a.graph().num_values(); ++v) {
    const ir::Value& val = a.graph().value(v);
    const bool persistent = val.role == ir::ValueRole::Parameter || val.role == ir::ValueRole::State;
    if (!persistent || !a.has(val.name) || !b.has(val.name)) continue;
    test_support::expect_close_norm(values_of(a, v), values_of(b, b.value_id(val.name)), row, what + ": " + val.name);
  }
  if (a.loss() >= 0)
    test_support::expect_close_norm(values_of(a, a.loss()), values_of(b, b.loss()), row, what + ": loss");
  test_support::expect_close_norm(values_of(a, a.logits()), values_of(b, b.logits()), row, what + ": logits");
}

TEST(GpuNetwork, ResNetTrainingStepMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto gpu = compile(model, "cuda", passes::Mode::Train), ref = compile(model, "cpu_ref", passes::Mode::Train);
  for (Executable* e : {gpu.get(), ref.get()}) {
    feed(*e, 10);
    e->run();
    e->run();  // two steps: momentum buffers are used, not just filled
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
  for (auto [p, grad] : fused->param_grads()) {
    const std::string name = fused->graph().value(p).name;
    auto find_grad = [&](const Executable& e) {
      for (auto [q, gq] : e.param_grads())
        if (e.graph().value(q).name == name) return gq;
      return -1;
    };
    const std::vector<double> f = values_of(*fused, grad), u = values_of(*unfused, find_grad(*unfused)),
                              r = values_of(*ref, find_grad(*ref));
    test_support::expect_close_norm(f, r, row, "fused cuda gradient of " + name);
    test_support::expect_close_norm(u, r, row, "unfused cuda gradient of " + name);
  }
}

TEST(GpuNetwork, FusedTrainingStepMatchesUnfusedOnGpu) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph model = frontend::build_model("resnet_cifar", {8});
  auto fused = compile(model, "cuda", passes::Mode::Train);
  auto unfused = compile(model, "cuda", passes::Mode::Train, {"fuse_conv_bn_relu", "fuse_elementwise"});
  for (Executable* e : {fused.get(), unfused.get()}) {
    feed(*e, 10);
    e->run();
    e->run();
  }
  expect_same_step(*fused, *unfused, tf32_disabled() ? DType::f32 : DType::f16, "fused vs unfused");
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
  // One step: momentum = gradient, compared with the precision's row by relative L2 error.
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
  cfg.backend = "cuda";
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {64}), cfg);
  data::BatchIterator it(ds, 64, true, 1, true);
  std::vector<double> losses;
  for (int e = 0; e < 4; ++e) losses.push_back(t.train_epoch(it, e, 4).loss);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
  EXPECT_GT(t.evaluate(ds).accuracy, 0.8);
}

}  // namespace
}  // namespace trident
