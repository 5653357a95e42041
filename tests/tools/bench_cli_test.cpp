// `trident bench` on the CPU: its JSON carries the numbers the GPU comparison reads (images/s,
// median and p90 ms, peak device memory), the layer benchmark includes the input gradient,
// and bad flags are one sentence with exit 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run_binary.h"

namespace {

using trident::test_support::run_trident;

nlohmann::json bench_json(const std::string& args) {
  const auto r = run_trident("bench " + args + " --json", false);
  EXPECT_EQ(r.code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(BenchCli, LayerTrainingReportsTimesAndThroughput) {
  const auto j = bench_json("--model cbr-layer --layer 8 8 16 16 --batch 4 --iterations 3 --warmup 1 --backend cpu_ref");
  EXPECT_EQ(j["model"], "cbr-layer");
  EXPECT_EQ(j["mode"], "train");
  EXPECT_EQ(j["iterations"], 3);
  EXPECT_GT(j["images_per_s"].get<double>(), 0);
  EXPECT_GE(j["ms_p90"].get<double>(), j["ms_min"].get<double>());
  EXPECT_EQ(j["peak_device_bytes"], 0);  // host memory only
}

TEST(BenchCli, ZooModelInferenceUnfusedRuns) {
  const auto j = bench_json("--model fmnist_cnn --mode infer --batch 2 --iterations 2 --warmup 0 "
                            "--disable-pass fold_bn --disable-pass fuse_conv_epilogue");
  EXPECT_EQ(j["disabled_passes"].size(), 2u);
  EXPECT_GT(j["ms_median"].get<double>(), 0);
}

TEST(BenchCli, BadFlagsAreOneSentence) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench --model nope", "unknown model 'nope'"},
      {"bench --mode sideways", "--mode: sideways not in {train,infer}"},
      {"bench --layer 1 2", "--layer"},
      {"bench --model cbr-layer --disable-pass nope", "unknown pass 'nope'"},
      {"bench --precision fp8", "--precision"},
      // Flags that would change nothing used to be accepted silently.
      {"bench --model fmnist_cnn --layer 8 8 8 8", "--layer sets the shape of --model cbr-layer"},
      {"bench --model cbr-layer --winograd on", "--winograd applies to inference"}};
  for (const auto& [args, needle] : cases) {
    const auto r = run_trident(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
  }
}

}  // namespace

// The default bench was ResNet-50 everywhere, an ~18-minute job on a 2-core CPU that printed
// nothing until it ended; on a CPU it now times the default network, at batch 32.
TEST(BenchCli, DefaultsFitTheDevice) {
  const auto j = bench_json("--device cpu_ref --iterations 1 --warmup 0 --threads 1");
  EXPECT_EQ(j["model"], "fmnist_cnn");
  EXPECT_EQ(j["batch"], 32);
  EXPECT_EQ(bench_json("--device cpu_ref --model resnet_cifar --batch 2 --iterations 1 --warmup 0")["model"],
            "resnet_cifar");
  EXPECT_EQ(run_trident("explain --threads 1 --json", false).code, 0);  // explain takes --threads too
}
