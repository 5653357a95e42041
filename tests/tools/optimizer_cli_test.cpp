// `trident train --optimizer adamw` through the real binary on synthetic data: the loss falls on
// the default network, AdamW takes torch's default rate and the schedules apply to it, and bad
// optimizer settings are one sentence and exit 1 before any training.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/run_binary.h"

namespace {

using trident::test_support::run_trident;

const std::string kRun = "train --synthetic --batch 32 --train-limit 256 --test-limit 96 --threads 2";

// The "epoch" events of a --json run.
std::vector<nlohmann::json> epochs(const std::string& args) {
  const auto r = run_trident(args + " --json", false);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
  std::vector<nlohmann::json> out;
  std::istringstream events(r.output);
  for (std::string line; std::getline(events, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "epoch") out.push_back(j);
  }
  return out;
}

}  // namespace

TEST(OptimizerCli, AdamwLossFallsOnTheDefaultNetworkWithTorchsDefaultRate) {
  const auto e = epochs(kRun + " --epochs 3 --warmup 0 --optimizer adamw");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_LT(e.back()["loss"].get<double>(), 0.8 * e.front()["loss"].get<double>());
  // The rate at epoch 1's last step (step 7 of 24) on the cosine from AdamW's default 1e-3.
  const double pi = 3.141592653589793;
  EXPECT_NEAR(e[0]["lr"].get<double>(), 1e-3 * 0.5 * (1 + std::cos(pi * 7 / 24)), 1e-9);
}

TEST(OptimizerCli, StepScheduleAppliesToAdamw) {
  const auto e = epochs(kRun + " --epochs 3 --warmup 0 --optimizer adamw --lr 0.002 --lr-steps 1,2 --lr-gamma 0.5");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NEAR(e[0]["lr"].get<double>(), 0.002, 1e-9);
  EXPECT_NEAR(e[1]["lr"].get<double>(), 0.001, 1e-9);
  EXPECT_NEAR(e[2]["lr"].get<double>(), 0.0005, 1e-9);
}

TEST(OptimizerCli, SgdStaysTheDefault) {
  const auto e = epochs(kRun + " --epochs 1 --warmup 0");
  ASSERT_EQ(e.size(), 1u);
  // SGD's default rate 0.05 on the cosine at the epoch's last step (step 7 of 8).
  EXPECT_NEAR(e[0]["lr"].get<double>(), 0.05 * 0.5 * (1 + std::cos(3.141592653589793 * 7 / 8)), 1e-9);
  const auto adamw = epochs(kRun + " --epochs 1 --warmup 0 --optimizer adamw --lr 0.05 --weight-decay 5e-4");
  ASSERT_EQ(adamw.size(), 1u);
  EXPECT_NE(adamw[0]["loss"], e[0]["loss"]) << "the same settings, another optimizer";
}

TEST(OptimizerCli, BadValuesAreOneSentenceBeforeTraining) {
  const std::pair<const char*, const char*> cases[] = {
      {" --optimizer adam", "--optimizer"}, {" --lr -0.001", "--lr"},     {" --beta1 1", "--beta1"},
      {" --beta1 -0.1", "--beta1"},        {" --beta2 1.5", "--beta2"},  {" --eps 0", "--eps"},
      {" --optimizer adamw --weight-decay -1", "--weight-decay"},
  };
  for (const auto& [flag, name] : cases) {
    const auto r = run_trident(kRun + flag);
    EXPECT_EQ(r.code, 1) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("trident: error: "), std::string::npos) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find(name), std::string::npos) << flag << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
    EXPECT_EQ(r.output.find("epoch 1"), std::string::npos) << "refused only after training: " << r.output;
  }
}

TEST(OptimizerCli, HelpNamesTheOptimizerFlags) {
  const auto r = run_trident("train --help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--optimizer", "--beta1", "--beta2", "--eps", "adamw"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}
