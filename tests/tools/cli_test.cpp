// The trident command on bad input: one clear sentence on stderr and a non-zero exit, never a
// crash; and its JSON output on good input.
#include <gtest/gtest.h>

#include "support/run_binary.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <utility>
#include <vector>

namespace {

using Result = trident::test_support::RunResult;
Result run(const std::string& args, bool merge = true) {
  return trident::test_support::run_trident(args, merge);
}

void expect_clean_failure(const Result& r, const std::string& needle) {
  EXPECT_GT(r.code, 0) << r.output;
  EXPECT_LT(r.code, 100) << "killed by a signal: " << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("trident_cli_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace

TEST(Cli, UnknownModelIsOneSentence) {
  Result r = run("train --model resnet51");
  expect_clean_failure(r, "unknown model 'resnet51'");
  r = run("info --model nope");
  expect_clean_failure(r, "unknown model 'nope'");
}

TEST(Cli, UnknownAndMalformedFlags) {
  expect_clean_failure(run("train --bogus"), "--bogus");
  expect_clean_failure(run("train --epochs many"), "--epochs");
  expect_clean_failure(run("train --batch 0"), "--batch");
  expect_clean_failure(run("train --backend tpu"), "--backend");
  expect_clean_failure(run("frobnicate"), "frobnicate");
}

// CLI::Range and CLI::PositiveNumber let nan and inf through, and an unsigned flag saturated
// "-1"; every floating-point training flag and --seed now refuse them with the allowed range.
TEST(Cli, NonFiniteAndNegativeValuesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"train --warmup nan", "--warmup: must be a number from 0 to 1000, not 'nan'"},
      {"train --lr inf", "--lr: must be a finite number > 0, not 'inf'"},
      {"train --lr nan", "--lr: must be a finite number > 0"},
      {"train --momentum nan", "--momentum: must be a number from 0 to 0.999999"},
      {"train --weight-decay -inf", "--weight-decay: must be a number from 0 to 1"},
      {"train --epochs 100001", "--epochs: must be a number from 1 to 100000"},
      {"train --seed -1", "--seed: must be a whole number from 0 to 18446744073709551615, not '-1'"},
      {"infer fmnist_cnn --seed -1", "--seed: must be a whole number"},
  };
  for (const auto& [args, needle] : bad) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
  }
}

TEST(Cli, MissingDatasetDirectoryNamesIt) {
  auto d = temp_dir("missing") / "nowhere";
  expect_clean_failure(run("train --data " + d.string()), d.string());
}

TEST(Cli, CorruptDatasetFileNamesIt) {
  auto d = temp_dir("corrupt");
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::ofstream(d / f) << "this is not an IDX file";
  }
  expect_clean_failure(run("train --data " + d.string()), "train-images-idx3-ubyte.gz");
}

TEST(Cli, ModelThatDoesNotFitTheDataIsExplained) {
  expect_clean_failure(run("train --model resnet18"), "--synthetic");
}

TEST(Cli, InfoJsonHasTheNumbers) {
  Result r = run("info --model resnet50 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"params\":25557032"), std::string::npos);
  EXPECT_NE(r.output.find("\"arena_bytes\""), std::string::npos);
}

// One default batch per mode (runtime/default_batch.h): info and explain count what train (64)
// or infer (1) would compile without --batch.
TEST(Cli, DefaultBatchesFollowTheMode) {
  Result train = run("info --json"), infer = run("info --mode infer --json");
  ASSERT_EQ(train.code, 0) << train.output;
  ASSERT_EQ(infer.code, 0) << infer.output;
  EXPECT_NE(train.output.find("\"batch\":64"), std::string::npos) << train.output;
  EXPECT_NE(infer.output.find("\"batch\":1,"), std::string::npos) << infer.output;
  Result explained = run("explain --json"), sized = run("explain --json --batch 64");
  ASSERT_EQ(explained.code, 0) << explained.output;
  const auto arena = [](const std::string& s) { return s.substr(s.find("\"arena_bytes\""), 60); };
  EXPECT_EQ(arena(explained.output), arena(sized.output));
}

TEST(Cli, TrainsOnSyntheticDataWithJsonEvents) {
  Result r = run("train --synthetic --train-limit 128 --test-limit 64 --batch 32 --epochs 1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"event\":\"start\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"event\":\"epoch\""), std::string::npos);
  EXPECT_NE(r.output.find("\"event\":\"test\""), std::string::npos);
  EXPECT_NE(r.output.find("test accuracy"), std::string::npos);
  EXPECT_EQ(r.output.find("test accuracy 0.00%"), std::string::npos) << "the test split must share the classes";
}

// explain reports the pipeline of the device asked for; --device cuda without a usable GPU
// still compiles for the cuda pipeline (its 1-bit ReLU masks, folded gradient sums and
// batchnorm applies deferred into the next convolution), says
// why no kernels were built, and exits 0.
TEST(Cli, ExplainForTheCudaPipelineNeedsNoGpu) {
  Result r = run("explain --model resnet_cifar --mode train --batch 2 --device cuda --precision fp16 --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"pipeline\":\"cuda\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("relu-bitmask"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grad-sum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bn-apply-prologue"), std::string::npos) << r.output;
  Result cpu = run("explain --model resnet_cifar --mode train --batch 2 --json", false);
  ASSERT_EQ(cpu.code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("relu-bitmask"), std::string::npos) << "the CPU pipeline keeps y as the mask";
}

// --device is the one flag for where a network runs, and names a CPU backend too; --backend
// is its alias. Both given, naming different devices, is one sentence and a non-zero exit.
TEST(Cli, DeviceNamesTheBackendAndBackendIsItsAlias) {
  const std::string bench = "bench --model cbr-layer --layer 8 8 16 16 --batch 4 --iterations 1 --warmup 0 --json ";
  for (const char* flags : {"--device cpu_ref", "--backend cpu_ref", "--device cpu_ref --backend cpu_ref"}) {
    Result r = run(bench + flags, false);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.output;
    EXPECT_NE(r.output.find("\"backend\":\"cpu_ref\""), std::string::npos) << flags << ": " << r.output;
  }
  Result both = run(bench + "--device cuda --backend cpu_ref");
  expect_clean_failure(both, "trident: error: --device cuda and --backend cpu_ref disagree");
  EXPECT_EQ(std::count(both.output.begin(), both.output.end(), '\n'), 1) << both.output;
  expect_clean_failure(run("train --device cpu --backend cpu_ref --synthetic"), "disagree");
}

// Usage errors used to be CLI11's two lines without the prefix; now every error is one line.
TEST(Cli, UsageErrorsAreOneSentenceWithThePrefix) {
  for (const char* args : {"train --bogus", "train --lr -1", "infer --batch", ""}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("trident: error: ", 0), 0u) << args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << ": " << r.output;
  }
  EXPECT_NE(run("train --bogus").output.find("(see 'trident train --help')"), std::string::npos);
  EXPECT_EQ(run("train --help").code, 0);
}

// A script reading stdout gets train's result; progress stays on stderr.
TEST(Cli, TrainPrintsItsResultOnStdout) {
  const Result r = run("train --synthetic --train-limit 128 --test-limit 64 --batch 32 --epochs 1", false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("test accuracy ", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "progress belongs on stderr: " << r.output;
}

// --lr 100 used to end with a loss of 2e17 and exit 0; now the run stops at the first batch
// whose loss has blown up, says so, and leaves the last checkpoint as it was.
TEST(Cli, ADivergingRunStopsWithASentence) {
  const auto d = temp_dir("diverge");
  const std::string ckpt = (d / "run.ckpt").string();
  const std::string common = "train --synthetic --train-limit 256 --test-limit 64 --batch 32 --threads 1 --save " + ckpt;
  ASSERT_EQ(run(common + " --epochs 1").code, 0);
  const auto saved = std::filesystem::last_write_time(ckpt);
  const Result r = run(common + " --epochs 3 --lr 100");
  expect_clean_failure(r, "training diverged in epoch 1");
  EXPECT_NE(r.output.find("lower --lr (it is 100)"), std::string::npos) << r.output;
  EXPECT_EQ(std::filesystem::last_write_time(ckpt), saved) << "the diverged run must not overwrite the checkpoint";
}

// `infer --weights run.ckpt` (the checkpoint name the README uses) was refused for not ending in
// .safetensors; the file's content decides, and a checkpoint's momentum buffers are left aside.
TEST(Cli, InferReadsATrainingCheckpointByItsContent) {
  const auto d = temp_dir("infer_ckpt");
  const std::string ckpt = (d / "run.ckpt").string();
  ASSERT_EQ(run("train --synthetic --train-limit 128 --test-limit 32 --batch 32 --epochs 1 --threads 1 --save " + ckpt).code, 0);
  const Result r = run("infer fmnist_cnn --weights " + ckpt + " --iterations 1 --warmup 0 --threads 1");
  EXPECT_EQ(r.code, 0) << r.output;
  std::ofstream(d / "bad.ckpt") << "not a tensor file";
  expect_clean_failure(run("infer fmnist_cnn --weights " + (d / "bad.ckpt").string()), "not a valid safetensors file");
}
