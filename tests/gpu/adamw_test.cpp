// The cuda adamw_update beyond the op case table (support/op_cases/linear_loss_sgd_cases.cpp,
// one step on every backend): three steps in a row on the tensor table against cpu_ref (the
// step count advancing on the GPU), identical bits on a re-run, the flat loop of a training
// executable against cpu_ref's, an overflowed f16 step that changes nothing but the scale, and
// a training run whose loss falls.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/trainer.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

using runtime::Executable;

const test_support::OpCase& table_case() { return test_support::op_case("adamw_update_tensor_table"); }

// Every compared value of the table case after `steps` steps on `backend`, from one draw.
std::vector<double> table_after(const std::string& backend, int steps) {
  const ir::Graph g = table_case().build(DType::f32);
  test_support::GraphRunner r(g, backend);
  r.randomize(43);
  table_case().prepare(r, g);
  r.run(steps);
  std::vector<double> all;
  for (const std::string& name : table_case().outputs)
    for (double v : r.values(g.find_value(name))) all.push_back(v);
  return all;
}

TEST(CudaAdamw, ThreeTableStepsMatchTheReference) {
  TRIDENT_REQUIRE_GPU();
  test_support::expect_close(table_after("cuda", 3), table_after("cpu_ref", 3), DType::f32, "three AdamW steps");
}

TEST(CudaAdamw, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  EXPECT_EQ(table_after("cuda", 3), table_after("cuda", 3));
}

std::unique_ptr<Executable> compile_adamw(const std::string& backend, DType precision = DType::f32) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.precision = precision;
  opt.optimizer_kind = passes::OptimizerKind::AdamW;
  opt.weight_decay = 0.01;
  auto exe = Executable::compile(frontend::build_model("fmnist_cnn", {8}), opt);
  exe->init_parameters(42);
  return exe;
}

void feed(Executable& exe) {
  Rng rng(9);
  for (const char* name : {"images", "labels", "lr"}) {
    const int id = exe.value_id(name);
    TensorView t = exe.host_view(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
      else if (std::string(name) == "lr") t.as<float>()[i] = 1e-3f;
      else t.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe.upload(id);
  }
}

std::vector<double> values_of(const Executable& exe, const std::string& name) {
  const int id = exe.value_id(name);
  exe.download(id);
  TensorView t = exe.host_view(id);
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<float>()[i];
  return out;
}

// The planner's flat buffers: the one-loop form. The fc layer's update after one step, relative
// to the step's size (the whole network's rounding reaches the gradients).
TEST(CudaAdamw, TrainingStepOverFlatBuffersMatchesCpuRef) {
  TRIDENT_REQUIRE_GPU();
  auto gpu = compile_adamw("cuda");
  auto ref = compile_adamw("cpu_ref");
  for (Executable* e : {gpu.get(), ref.get()}) {
    feed(*e);
    e->run();
  }
  EXPECT_EQ(values_of(*gpu, "adamw.step")[0], 1.0);
  test_support::expect_close_norm(values_of(*gpu, "fc.weight"), values_of(*ref, "fc.weight"), DType::f16,
                                  "fc.weight after one AdamW step");
}

TEST(CudaAdamw, OverflowedF16StepChangesOnlyTheScale) {
  TRIDENT_REQUIRE_GPU();
  auto exe = compile_adamw("cuda", DType::f16);
  feed(*exe);
  const int images = exe->value_id("images");
  exe->host_view(images).as<float>()[3] = std::numeric_limits<float>::infinity();
  exe->upload(images);
  const std::vector<double> before = values_of(*exe, "fc.weight");
  exe->run();
  EXPECT_EQ(values_of(*exe, "fc.weight"), before) << "an overflowed step must leave the weights alone";
  EXPECT_EQ(values_of(*exe, "adamw.step")[0], 0.0) << "and not count";
  EXPECT_EQ(values_of(*exe, "amp.loss_scale")[0], 32768.0);
  feed(*exe);
  exe->run();
  EXPECT_NE(values_of(*exe, "fc.weight"), before);
  EXPECT_EQ(values_of(*exe, "adamw.step")[0], 1.0);
}

TEST(CudaAdamw, LossFallsWhenTrainingOnGpu) {
  TRIDENT_REQUIRE_GPU();
  data::Dataset ds = data::make_synthetic(512, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.compile.backend = "cuda";
  cfg.compile.optimizer_kind = passes::OptimizerKind::AdamW;
  cfg.compile.weight_decay = 0.01;
  cfg.lr = 1e-3;
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {64}), cfg);
  data::BatchIterator it(ds, 64, true, 1, true);
  std::vector<double> losses;
  for (int e = 0; e < 4; ++e) losses.push_back(t.train_epoch(it, e, 4).loss);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

}  // namespace
}  // namespace trident
