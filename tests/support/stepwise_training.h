// Test support: the trainer queues step k + 1 before it reads step k back (runtime/
// queued_steps.h). This runs an epoch through the trainer and the same steps one by one on a
// twin trainer's executable, each read back before the next is sent, and requires the same
// running loss and accuracy after every step and the same parameters at the end, bit for bit:
// a step scored with another step's labels, logits or learning rate shows here.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "runtime/data/batch_iterator.h"
#include "runtime/trainer.h"

namespace trident::test_support {

struct StepScores {
  std::vector<double> mean_loss, accuracy;  // after each step, as the trainer's callback reports them
};

// Steps of `twin` (a trainer made as the other one was) run one at a time over `it`'s epoch
// `epoch` of `epochs`, starting at schedule step `first_step`.
inline StepScores run_one_by_one(runtime::Trainer& twin, data::BatchIterator& it, int64_t epoch, int64_t epochs,
                                 int64_t first_step) {
  runtime::Executable& exe = twin.train_executable();
  const runtime::TrainConfig& cfg = twin.config();
  const int images = exe.value_id("images"), labels = exe.value_id("labels"), lr = exe.value_id("lr");
  TensorView x = exe.host_view(images), y = exe.host_view(labels), rate = exe.host_view(lr),
             loss = exe.host_view(exe.loss()), logits = exe.host_view(exe.logits());
  const int64_t per_epoch = it.batches_per_epoch();
  const int64_t warmup = static_cast<int64_t>(cfg.warmup_epochs * per_epoch);
  StepScores s;
  double loss_sum = 0;
  int64_t correct = 0, seen = 0, step = first_step;
  it.start_epoch(epoch);
  while (it.next(x.as<float>(), y.as<int32_t>())) {
    rate.as<float>()[0] = static_cast<float>(runtime::learning_rate(step++, per_epoch * epochs, warmup, cfg.lr));
    for (int v : {images, labels, lr}) exe.upload(v);
    exe.run();
    exe.download(exe.loss());
    exe.download(exe.logits());
    loss_sum += loss.as<float>()[0];
    correct += runtime::count_correct(logits.as<float>(), y.as<int32_t>(), it.batch(), logits.shape[1]);
    seen += it.batch();
    s.mean_loss.push_back(loss_sum / static_cast<double>(s.mean_loss.size() + 1));
    s.accuracy.push_back(static_cast<double>(correct) / static_cast<double>(seen));
  }
  return s;
}

// Trains `epochs` epochs of `ds` in batches of `batch` with `cfg` through Trainer::train_epoch and
// one by one, and compares every step's scores and the final parameters.
inline void expect_queued_steps_as_one_by_one(const ir::Graph& model, const runtime::TrainConfig& cfg,
                                              const data::Dataset& ds, int64_t batch, int64_t epochs) {
  runtime::Trainer queued(model, cfg), twin(model, cfg);
  data::BatchIterator a(ds, batch, true, 7, true), b(ds, batch, true, 7, true);
  for (int64_t e = 0; e < epochs; ++e) {
    StepScores got;
    const runtime::EpochStats st = queued.train_epoch(a, e, epochs, [&](int64_t, int64_t, double l, double acc, double) {
      got.mean_loss.push_back(l);
      got.accuracy.push_back(acc);
    });
    const StepScores want = run_one_by_one(twin, b, e, epochs, e * b.batches_per_epoch());
    ASSERT_EQ(got.mean_loss.size(), want.mean_loss.size()) << "steps of epoch " << e;
    for (size_t k = 0; k < want.mean_loss.size(); ++k) {
      EXPECT_EQ(got.mean_loss[k], want.mean_loss[k]) << "mean loss after step " << k << " of epoch " << e;
      EXPECT_EQ(got.accuracy[k], want.accuracy[k]) << "accuracy after step " << k << " of epoch " << e;
    }
    EXPECT_EQ(st.loss, want.mean_loss.back()) << "epoch " << e;
  }
  const WeightMap got = queued.train_executable().export_weights(), want = twin.train_executable().export_weights();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).data, t.data) << name << " differs after " << epochs << " epochs";
  }
}

}  // namespace trident::test_support
