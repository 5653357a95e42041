// AdamW's state in checkpoints: the first and second moments and the step count are saved with
// the weights, and save → load → continue gives the losses and weights of an uninterrupted run
// bitwise on cpu_ref; a checkpoint written before AdamW existed (no 'optimizer' metadata) still
// loads as SGD and resumes; a resume that names the other optimizer is one sentence.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "support/run_binary.h"

using namespace trident;
using namespace trident::runtime;
namespace fs = std::filesystem;

namespace {

constexpr int kEpochs = 3;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("trident_adamw_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TrainConfig config(passes::OptimizerKind kind) {
  TrainConfig c;
  c.compile.backend = "cpu_ref";
  c.compile.optimizer_kind = kind;
  if (kind == passes::OptimizerKind::AdamW) {
    c.lr = 2e-3;
    c.compile.weight_decay = 0.01;
    c.compile.beta2 = 0.99;
  }
  c.seed = 7;
  c.epochs = kEpochs;
  return c;
}

const data::Dataset& dataset() {
  static const data::Dataset ds = data::make_synthetic(128, 28, 28, 1, 10, 11);
  return ds;
}

CheckpointInfo info_after(const Trainer& t, int64_t epoch) {
  CheckpointInfo i = checkpoint_info(t);
  i.model = "fmnist_cnn";
  i.epoch = epoch;
  i.dataset = dataset().name;
  i.train_images = dataset().count;
  return i;
}

// Trains `kind` for kEpochs straight, and again with a checkpoint after the first epoch that a
// fresh trainer resumes (its file rewritten by `edit` first); both must agree bitwise.
void expect_resume_retraces(passes::OptimizerKind kind, const std::string& name,
                            const std::function<void(const std::string&)>& edit = {}) {
  omp_set_num_threads(1);
  const ir::Graph model = frontend::build_model("fmnist_cnn", {32});
  std::vector<double> straight;
  WeightMap straight_weights;
  {
    Trainer t(model, config(kind));
    data::BatchIterator it(dataset(), 32, true, 7, true);
    for (int e = 0; e < kEpochs; ++e) straight.push_back(t.train_epoch(it, e, kEpochs).loss);
    straight_weights = t.train_executable().export_weights();
  }
  const std::string ckpt = (temp_dir(name) / "run.ckpt").string();
  {
    Trainer t(model, config(kind));
    data::BatchIterator it(dataset(), 32, true, 7, true);
    EXPECT_EQ(t.train_epoch(it, 0, kEpochs).loss, straight[0]);
    save_checkpoint(ckpt, t, info_after(t, 1));
  }
  if (edit) edit(ckpt);
  const Checkpoint ck = load_checkpoint(ckpt);
  EXPECT_EQ(ck.info.config.compile.optimizer_kind, kind);
  TrainConfig fresh = config(passes::OptimizerKind::Sgd);  // everything must come from the file
  fresh.compile = ck.info.config.compile;
  fresh.lr = ck.info.config.lr;
  fresh.seed = 99;
  Trainer t(model, fresh);
  resume_from(t, ck, ckpt, "fmnist_cnn");
  data::BatchIterator it(dataset(), 32, true, ck.info.config.seed, true);
  for (int e = 1; e < kEpochs; ++e) EXPECT_EQ(t.train_epoch(it, e, kEpochs).loss, straight[e]) << "epoch " << e + 1;
  const WeightMap resumed = t.train_executable().export_weights();
  ASSERT_EQ(resumed.size(), straight_weights.size());
  for (const auto& [n, h] : straight_weights) EXPECT_EQ(resumed.at(n).data, h.data) << n;
}

}  // namespace

TEST(CheckpointAdamw, MomentsAndStepCountTravel) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {32});
  Trainer t(model, config(passes::OptimizerKind::AdamW));
  data::BatchIterator it(dataset(), 32, true, 7, true);
  t.train_epoch(it, 0, kEpochs);
  const std::string ckpt = (temp_dir("state") / "c.ckpt").string();
  save_checkpoint(ckpt, t, info_after(t, 1));
  const Checkpoint ck = load_checkpoint(ckpt);
  size_t first = 0, second = 0, momenta = 0;
  for (const auto& [name, h] : ck.weights) {
    first += name.ends_with(".exp_avg");
    second += name.ends_with(".exp_avg_sq");
    momenta += name.ends_with(".momentum");
  }
  EXPECT_GT(first, 0u);
  EXPECT_EQ(second, first);
  EXPECT_EQ(momenta, 0u);
  ASSERT_TRUE(ck.weights.contains("adamw.step"));
  HostTensor step = ck.weights.at("adamw.step");
  EXPECT_EQ(reinterpret_cast<const float*>(step.data.data())[0], 4.f) << "128 images / 32: four steps";
  EXPECT_EQ(ck.info.config.compile.optimizer_kind, passes::OptimizerKind::AdamW);
  EXPECT_EQ(ck.info.config.compile.beta2, 0.99);
  EXPECT_EQ(ck.info.config.lr, 2e-3);
}

TEST(CheckpointAdamw, ResumeContinuesBitwiseLikeAnUninterruptedRun) {
  expect_resume_retraces(passes::OptimizerKind::AdamW, "bitwise");
}

TEST(CheckpointAdamw, AnSgdCheckpointWithoutOptimizerMetadataStillResumes) {
  expect_resume_retraces(passes::OptimizerKind::Sgd, "old", [](const std::string& path) {
    Metadata md;
    const WeightMap w = read_safetensors(path, &md);
    for (const char* key : {"optimizer", "beta1", "beta2", "eps"}) md.erase(key);
    write_safetensors(path, w, md);
  });
}

TEST(CheckpointAdamw, ResumingWithTheOtherOptimizerIsOneSentence) {
  const fs::path d = temp_dir("cli");
  const std::string ckpt = (d / "c.ckpt").string();
  const std::string common = " train --synthetic --train-limit 64 --test-limit 32 --batch 32 --backend cpu_ref --threads 1";
  ASSERT_EQ(test_support::run_trident(common + " --epochs 1 --optimizer adamw --save " + ckpt).code, 0);
  const test_support::RunResult r = test_support::run_trident(common + " --epochs 2 --optimizer sgd --resume " + ckpt);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--optimizer differs from the checkpoint"), std::string::npos) << r.output;
  // Resuming without the flag takes the checkpoint's AdamW; --weights starts an SGD run from its tensors.
  EXPECT_EQ(test_support::run_trident(common + " --epochs 2 --resume " + ckpt).code, 0);
  EXPECT_EQ(test_support::run_trident(common + " --epochs 1 --weights " + ckpt).code, 0);
}
