// --max-memory through the real binary: train, infer and bench refuse a plan that does not fit
// with one sentence naming the size and the flag to lower, before anything large is allocated
// (infer --batch 65536 grew to 22.9 GB and was killed by the OOM killer); bad sizes are refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/run_binary.h"

namespace {

using trident::test_support::RunResult;
using trident::test_support::run_trident;

void expect_one_sentence(const RunResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.code, 1) << r.output;
  for (const std::string& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace

TEST(MemoryLimitCli, InferRefusesAPlanLargerThanTheLimit) {
  expect_one_sentence(run_trident("infer --batch 65536 --max-memory 1G"),
                      {"the infer graph's buffers (arena", "more than the 1.0 GiB that --max-memory 1G allows",
                       "lower --batch"});
}

TEST(MemoryLimitCli, TrainAndBenchRefuseAPlanLargerThanTheLimit) {
  expect_one_sentence(run_trident("train --synthetic --train-limit 256 --test-limit 64 --batch 256 --max-memory 16M"),
                      {"the train graph's buffers", "--max-memory 16M", "lower --batch"});
  expect_one_sentence(run_trident("bench --model resnet50 --batch 512 --max-memory 2G"),
                      {"the train graph's buffers", "GiB", "lower --batch"});
}

TEST(MemoryLimitCli, AFittingLimitRuns) {
  const RunResult r = run_trident("infer --batch 8 --max-memory 512M --iterations 1 --warmup 0 --json", false);
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(MemoryLimitCli, MalformedSizesAreRefused) {
  for (const char* bad : {"8X", "0", "-1G", "lots"}) {
    const RunResult r = run_trident(std::string("infer --max-memory ") + bad);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("--max-memory: must be a size such as 512M"), std::string::npos) << r.output;
  }
}
