// End-to-end training on the default backend (oneDNN where built): the loss falls on learnable
// synthetic data, the learning-rate schedule has its shape, and the same seed gives
// bitwise-equal runs.
#include <gtest/gtest.h>

#include "frontend/zoo.h"
#include "core/error.h"
#include "runtime/trainer.h"
#include "support/stepwise_training.h"

using namespace trident;

namespace {
std::vector<double> train_losses(uint64_t seed, int epochs) {
  data::Dataset ds = data::make_synthetic(256, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.seed = seed;
  cfg.lr = 0.05;
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {32}), cfg);
  data::BatchIterator it(ds, 32, true, seed, true);
  std::vector<double> losses;
  for (int e = 0; e < epochs; ++e) losses.push_back(t.train_epoch(it, e, epochs).loss);
  return losses;
}
}  // namespace

TEST(Training, LossFallsOnSyntheticData) {
  auto losses = train_losses(1, 4);
  EXPECT_GT(losses.front(), 1.0);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

TEST(Training, SameSeedGivesBitwiseEqualLosses) {
  auto a = train_losses(3, 1), b = train_losses(3, 1);
  EXPECT_EQ(a, b);
}

// The trainer queues the next step before it reads the last one back: every step is still scored
// with its own loss, logits and labels, and trains what steps run one by one train.
TEST(Training, QueuedStepsScoreAndTrainAsStepsRunOneByOne) {
  const data::Dataset ds = data::make_synthetic(160, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.lr = 0.05;
  test_support::expect_queued_steps_as_one_by_one(frontend::build_model("fmnist_cnn", {32}), cfg, ds, 32, 2);
}

TEST(Training, LearningRateWarmsUpThenDecays) {
  EXPECT_NEAR(runtime::learning_rate(0, 100, 10, 1.0), 0.19, 1e-9);
  EXPECT_NEAR(runtime::learning_rate(9, 100, 10, 1.0), 1.0, 1e-9);
  EXPECT_NEAR(runtime::learning_rate(10, 100, 10, 1.0), 1.0, 1e-9);
  EXPECT_NEAR(runtime::learning_rate(55, 100, 10, 1.0), 0.5, 1e-9);
  EXPECT_LT(runtime::learning_rate(99, 100, 10, 1.0), 0.01);
}

TEST(Training, StepScheduleWarmsUpThenDropsAtEachMilestone) {
  const std::vector<int64_t> at{40, 70};
  EXPECT_NEAR(runtime::step_learning_rate(0, 10, 1.0, at, 0.1), 0.19, 1e-9);
  EXPECT_NEAR(runtime::step_learning_rate(10, 10, 1.0, at, 0.1), 1.0, 1e-12);
  EXPECT_NEAR(runtime::step_learning_rate(39, 10, 1.0, at, 0.1), 1.0, 1e-12);
  EXPECT_NEAR(runtime::step_learning_rate(40, 10, 1.0, at, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(runtime::step_learning_rate(70, 10, 1.0, at, 0.1), 0.01, 1e-12);
  EXPECT_NEAR(runtime::step_learning_rate(500, 10, 1.0, at, 0.5), 0.25, 1e-12);
}

TEST(Training, StepEpochListsParseOrSaySo) {
  EXPECT_EQ(runtime::parse_step_epochs("30,60,80", "x"), (std::vector<int64_t>{30, 60, 80}));
  EXPECT_TRUE(runtime::parse_step_epochs("", "x").empty());
  EXPECT_EQ(runtime::step_epochs_text({2, 5}), "2,5");
  for (const char* bad : {"30,20", "0", "a", "3,", ",3", "3,3", "-1", "99999999999"})
    EXPECT_THROW(runtime::parse_step_epochs(bad, "--lr-steps"), trident::Error) << bad;
}

TEST(Training, EvaluationCountsEveryTestImageOnce) {
  data::Dataset ds = data::make_synthetic(100, 28, 28, 1, 10, 9);
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {32}), {});
  runtime::EvalStats ev = t.evaluate(ds);  // 100 = 3 full batches + a padded one
  EXPECT_EQ(ev.samples, 100);
  EXPECT_GE(ev.accuracy, 0.0);
  EXPECT_LE(ev.accuracy, 1.0);
}
