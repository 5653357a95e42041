// `trident train`'s metrics: evaluation after every epoch with top-1 and top-5, the --log
// metrics file (one JSON line per epoch), label smoothing, and the sentences for bad values
// of these flags, through the real binary on synthetic data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using trident::test_support::run_trident;

const std::string kRun = "train --synthetic --batch 32 --train-limit 256 --test-limit 96 --threads 2";

}  // namespace

TEST(TrainMetricsCli, LogHasOneLinePerEpochWithTopOneAndTopFive) {
  const fs::path dir = trident::test_support::fresh_temp_dir("train_metrics");
  const fs::path log = dir / "run.jsonl";
  const auto r = run_trident(kRun + " --epochs 3 --label-smoothing 0.1 --json --log " + log.string(), false);
  ASSERT_EQ(r.code, 0) << r.output;
  int evals = 0;
  std::istringstream events(r.output);
  for (std::string line; std::getline(events, line);)
    evals += nlohmann::json::parse(line)["event"] == "eval";
  EXPECT_EQ(evals, 3) << "an evaluation after every epoch";
  std::ifstream in(log);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  for (size_t e = 0; e < lines.size(); ++e) {
    const auto& j = lines[e];
    EXPECT_EQ(j["epoch"], e + 1);
    for (const char* key : {"train_loss", "train_accuracy", "eval_loss", "eval_accuracy", "eval_top5_accuracy", "lr",
                            "images_per_second", "seconds", "data_wait_seconds"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_GE(j["eval_top5_accuracy"].get<double>(), j["eval_accuracy"].get<double>());
    EXPECT_LE(j["eval_top5_accuracy"].get<double>(), 1.0);
  }
  EXPECT_LT(lines.back()["train_loss"].get<double>(), lines.front()["train_loss"].get<double>());
  fs::remove_all(dir);
}

TEST(TrainMetricsCli, LabelSmoothingChangesTheLoss) {
  auto loss = [](const std::string& extra) {
    const auto r = run_trident(kRun + " --epochs 1 --json" + extra, false);
    EXPECT_EQ(r.code, 0) << r.output;
    std::istringstream events(r.output);
    for (std::string line; std::getline(events, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["event"] == "epoch") return j["loss"].get<double>();
    }
    return -1.0;
  };
  const double plain = loss(""), smoothed = loss(" --label-smoothing 0.2");
  EXPECT_GT(plain, 0);
  EXPECT_GT(smoothed, 0);
  EXPECT_NE(plain, smoothed);
}

TEST(TrainMetricsCli, StepScheduleDropsTheRateAtItsEpochs) {
  const auto r = run_trident(kRun + " --epochs 3 --warmup 0 --lr 0.1 --lr-steps 1,2 --lr-gamma 0.5 --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<double> lr;
  std::istringstream events(r.output);
  for (std::string line; std::getline(events, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "epoch") lr.push_back(j["lr"].get<double>());
  }
  ASSERT_EQ(lr.size(), 3u);  // the rate of each epoch's last step
  EXPECT_NEAR(lr[0], 0.1, 1e-7);
  EXPECT_NEAR(lr[1], 0.05, 1e-7);
  EXPECT_NEAR(lr[2], 0.025, 1e-7);
}

TEST(TrainMetricsCli, BadValuesAreOneSentenceBeforeTraining) {
  const fs::path dir = trident::test_support::fresh_temp_dir("train_metrics_bad");
  for (const std::string& args : {kRun + " --label-smoothing 1.5", kRun + " --label-smoothing -0.1",
                                  kRun + " --lr-steps 5,3", kRun + " --lr-gamma 0",
                                  kRun + " --log " + (dir / "no_such_dir" / "m.jsonl").string()}) {
    const auto r = run_trident(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("trident: error: "), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("epoch 1"), std::string::npos) << "refused only after training: " << r.output;
  }
  fs::remove_all(dir);
}
