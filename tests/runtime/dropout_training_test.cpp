// Training with dropout through the Trainer: the random state is a checkpointed tensor, so a
// run saved after an epoch and resumed retraces the uninterrupted run bit for bit on cpu_ref
// (the masks of every later step included); two seeds draw different masks; evaluation runs the
// network without its dropouts.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>

#include "frontend/builder.h"
#include "ops/dropout.h"
#include "runtime/checkpoint/checkpoint.h"

using namespace trident;
using namespace trident::runtime;
namespace fs = std::filesystem;

namespace {

constexpr int kEpochs = 3;

// 28x28x1 images → conv-bn-relu → pool → dropout 0.5 → linear 10.
ir::Graph dropout_net() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {32, 28, 28, 1});
  x = b.cbr(x, 8, 3, 2, 1, "stem");
  x = b.dropout(b.flatten(b.global_avgpool(x)), 0.5, "drop");
  g.mark_output(b.linear(x, 10, true, "fc"));
  return g;
}

TrainConfig config(uint64_t seed) {
  TrainConfig c;
  c.compile.backend = "cpu_ref";
  c.seed = seed;
  c.epochs = kEpochs;
  return c;
}

const data::Dataset& dataset() {
  static const data::Dataset ds = data::make_synthetic(128, 28, 28, 1, 10, 11);
  return ds;
}

}  // namespace

TEST(DropoutTraining, ResumedRunRetracesTheUninterruptedOneBitwise) {
  omp_set_num_threads(1);
  const ir::Graph model = dropout_net();
  std::vector<double> straight;
  WeightMap straight_weights;
  {
    Trainer t(model, config(7));
    data::BatchIterator it(dataset(), 32, true, 7, true);
    for (int e = 0; e < kEpochs; ++e) straight.push_back(t.train_epoch(it, e, kEpochs).loss);
    straight_weights = t.train_executable().export_weights();
  }
  const fs::path dir = fs::temp_directory_path() / ("trident_dropout_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "run.ckpt").string();
  {
    Trainer t(model, config(7));
    data::BatchIterator it(dataset(), 32, true, 7, true);
    EXPECT_EQ(t.train_epoch(it, 0, kEpochs).loss, straight[0]);
    CheckpointInfo info = checkpoint_info(t);
    info.model = "dropout_net";
    info.epoch = 1;
    info.dataset = dataset().name;
    info.train_images = dataset().count;
    save_checkpoint(ckpt, t, info);
  }
  const Checkpoint ck = load_checkpoint(ckpt);
  ASSERT_TRUE(ck.weights.count(ops::kDropoutStateName)) << "the random state travels with the checkpoint";
  EXPECT_EQ(ck.weights.at(ops::kDropoutStateName).dtype, DType::i32);

  Trainer t(model, config(99));  // another seed: the state must come from the file
  resume_from(t, ck, ckpt, "dropout_net");
  data::BatchIterator it(dataset(), 32, true, 7, true);
  for (int e = 1; e < kEpochs; ++e) EXPECT_EQ(t.train_epoch(it, e, kEpochs).loss, straight[e]) << "epoch " << e + 1;
  const WeightMap resumed = t.train_executable().export_weights();
  for (const auto& [name, h] : straight_weights) EXPECT_EQ(resumed.at(name).data, h.data) << name;
  fs::remove_all(dir);
}

TEST(DropoutTraining, SeedsDrawDifferentMasksAndEvaluationHasNone) {
  omp_set_num_threads(1);
  const ir::Graph model = dropout_net();
  Trainer a(model, config(1)), b(model, config(1));
  // The same weights, another random state: the first epoch's loss differs by the masks alone.
  b.train_executable().copy_weights_from(a.train_executable());
  TensorView s = b.train_executable().host_view(b.train_executable().value_id(ops::kDropoutStateName));
  s.as<uint32_t>()[0] ^= 0x5a5a5a5au;
  b.train_executable().upload(b.train_executable().value_id(ops::kDropoutStateName));
  data::BatchIterator ia(dataset(), 32, true, 3, true), ib(dataset(), 32, true, 3, true);
  EXPECT_NE(a.train_epoch(ia, 0, 1).loss, b.train_epoch(ib, 0, 1).loss);
  // Evaluation is deterministic: twice the same loss.
  EXPECT_EQ(a.evaluate(dataset()).loss, a.evaluate(dataset()).loss);
  EXPECT_EQ(a.eval_executable().graph().find_value(ops::kDropoutStateName), -1);
}
