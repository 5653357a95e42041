// `trident infer` through the real binary: the trtexec-style summary, --json fields, --output
// written as a .npy of the right shape, inputs from .npy files, and clean one-sentence failures
// (no GPU backend, fp16 on the CPU, missing or corrupt input files).
#include <gtest/gtest.h>

#include "support/run_binary.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "frontend/zoo.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/device.h"
#include "runtime/npy.h"
#include "runtime/runner.h"

namespace {

using Result = trident::test_support::RunResult;
Result run(const std::string& args, bool merge = true) {
  return trident::test_support::run_trident(args, merge);
}

// Exit 1 and exactly one line of output containing `needle`.
void expect_one_sentence(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("trident_infer_cli_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace

TEST(InferCli, PrintsTrtexecStyleSummaryAndTopK) {
  Result r = run("infer --model fmnist_cnn --batch 2 --iterations 5 --warmup 1 --topk 3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Throughput: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" qps"), std::string::npos);
  EXPECT_NE(r.output.find("Latency: min = "), std::string::npos);
  EXPECT_NE(r.output.find("median = "), std::string::npos);
  EXPECT_NE(r.output.find("percentile(90%)"), std::string::npos);
  EXPECT_NE(r.output.find("percentile(99%)"), std::string::npos);
  EXPECT_NE(r.output.find("  #1 class "), std::string::npos);
  EXPECT_NE(r.output.find("  #3 class "), std::string::npos);
  EXPECT_EQ(r.output.find("  #4 class "), std::string::npos);
}

TEST(InferCli, JsonHasLatencyFieldsAndOutputIsANpy) {
  auto d = temp_dir("json");
  const std::string out = (d / "logits.npy").string();
  Result r = run("infer --model fmnist_cnn --batch 3 --iterations 4 --warmup 1 --json --threads 1 --output " + out, false);
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  for (const char* k : {"min", "max", "mean", "median", "p50", "p90", "p99"})
    EXPECT_TRUE(j["latency_ms"].contains(k)) << k;
  EXPECT_LE(j["latency_ms"]["p50"].get<double>(), j["latency_ms"]["p99"].get<double>());
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["iterations"], 4);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["throughput_images_per_s"].get<double>(), 0);
  EXPECT_NEAR(j["throughput_images_per_s"].get<double>(), 3000.0 / j["latency_ms"]["mean"].get<double>(), 1e-3);
  EXPECT_EQ(j["topk"].size(), 3u);
  EXPECT_EQ(j["input_shape"], nlohmann::json({3, 1, 28, 28}));
  auto t = trident::runtime::read_npy(out);
  EXPECT_EQ(t.shape, (trident::Shape{3, 10}));
  EXPECT_EQ(t.dtype, trident::DType::f32);
}

TEST(InferCli, ReadsAnNchwNpyInputAndIsDeterministic) {
  auto d = temp_dir("input");
  trident::runtime::HostTensor in{{2, 1, 28, 28}, trident::DType::f64, std::vector<std::byte>(2 * 28 * 28 * 8)};
  auto* p = reinterpret_cast<double*>(in.data.data());
  for (int i = 0; i < 2 * 28 * 28; ++i) p[i] = (i % 13) * 0.05;
  trident::runtime::write_npy((d / "x.npy").string(), in);
  const std::string common = "infer --model fmnist_cnn --iterations 1 --warmup 0 --backend cpu_ref --input " + (d / "x.npy").string();
  ASSERT_EQ(run(common + " --output " + (d / "a.npy").string()).code, 0);
  ASSERT_EQ(run(common + " --output " + (d / "b.npy").string()).code, 0);
  auto a = trident::runtime::read_npy((d / "a.npy").string());
  EXPECT_EQ(a.shape, (trident::Shape{2, 10}));  // batch taken from the file
  EXPECT_EQ(a.data, trident::runtime::read_npy((d / "b.npy").string()).data);
  // The file's batch and --batch must agree; NHWC data is refused with the expected NCHW shape.
  expect_one_sentence(run(common + " --batch 4"), "[4,1,28,28]");
  // One image without its batch axis used to be read as a batch of its channels.
  trident::runtime::HostTensor one{{1, 28, 28}, trident::DType::f64, std::vector<std::byte>(28 * 28 * 8)};
  trident::runtime::write_npy((d / "one.npy").string(), one);
  expect_one_sentence(run("infer --model fmnist_cnn --input " + (d / "one.npy").string()), "without a batch axis");
}

TEST(InferCli, ReadsSafetensorsInputAndWeights) {
  auto d = temp_dir("safetensors");
  // Weights exported from a Runner with seed 9 must give what --seed 9 gives.
  trident::runtime::Runner r(trident::frontend::build_model("fmnist_cnn", {1}));
  r.init_random_weights(9);
  trident::runtime::write_safetensors((d / "w.safetensors").string(), r.executable().export_weights(), {});
  trident::runtime::HostTensor x{{1, 1, 28, 28}, trident::DType::f32, std::vector<std::byte>(28 * 28 * 4)};
  auto* p = reinterpret_cast<float*>(x.data.data());
  for (int i = 0; i < 28 * 28; ++i) p[i] = (i % 7) * 0.25f;
  trident::runtime::write_safetensors((d / "x.safetensors").string(), {{"images", x}}, {});
  const std::string common = "infer --model fmnist_cnn --iterations 1 --warmup 0 --backend cpu_ref --input " +
                             (d / "x.safetensors").string();
  ASSERT_EQ(run(common + " --seed 9 --output " + (d / "a.npy").string()).code, 0);
  Result w = run(common + " --weights " + (d / "w.safetensors").string() + " --output " + (d / "b.npy").string());
  ASSERT_EQ(w.code, 0) << w.output;
  EXPECT_EQ(trident::runtime::read_npy((d / "a.npy").string()).data, trident::runtime::read_npy((d / "b.npy").string()).data);
  // Weights of another model are refused naming the tensor.
  trident::runtime::Runner other(trident::frontend::build_model("resnet_cifar", {1}));
  trident::runtime::write_safetensors((d / "o.safetensors").string(), other.executable().export_weights(), {});
  Result bad = run("infer --model fmnist_cnn --weights " + (d / "o.safetensors").string());
  EXPECT_EQ(bad.code, 1) << bad.output;
}

TEST(InferCli, DeviceAndPrecisionFailCleanly) {
  expect_one_sentence(run("infer --model fmnist_cnn --precision fp16"), "--precision fp16 needs --device cuda");
  expect_one_sentence(run("infer --model fmnist_cnn --precision bf16"), "--precision bf16");
  Result tpu = run("infer --model fmnist_cnn --device tpu");
  EXPECT_EQ(tpu.code, 1) << tpu.output;
  EXPECT_NE(tpu.output.find("--device: tpu not in {cpu,cuda,auto}"), std::string::npos) << tpu.output;
  if (!trident::runtime::gpu_unavailable_reason().empty()) {
    // Without a GPU: cuda is one sentence naming the reason, auto falls back with a notice.
    for (const char* cmd : {"infer --model fmnist_cnn --device cuda", "train --device cuda --synthetic",
                            "bench --model cbr-layer --device cuda"})
      expect_one_sentence(run(cmd), "trident: error: --device cuda: ");
    Result r = run("infer --model fmnist_cnn --device auto --iterations 1 --warmup 0");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("notice: no GPU ("), std::string::npos) << r.output;
  }
}

TEST(InferCli, MissingOrCorruptInputIsOneSentence) {
  auto d = temp_dir("bad");
  expect_one_sentence(run("infer --model fmnist_cnn --input " + (d / "absent.npy").string()), (d / "absent.npy").string());
  std::ofstream(d / "corrupt.npy") << "definitely not numpy";
  expect_one_sentence(run("infer --model fmnist_cnn --input " + (d / "corrupt.npy").string()), (d / "corrupt.npy").string());
  std::ofstream(d / "x.txt") << "1 2 3";
  expect_one_sentence(run("infer --model fmnist_cnn --input " + (d / "x.txt").string()), ".npy or .safetensors");
  expect_one_sentence(run("infer --model fmnist_cnn --weights " + (d / "absent.safetensors").string()), "absent.safetensors");
  expect_one_sentence(run("infer --model nope"), "unknown model 'nope'");
  // A failed --output leaves nothing behind.
  const auto out = d / "missing_dir" / "y.npy";
  expect_one_sentence(run("infer --model fmnist_cnn --iterations 1 --warmup 0 --output " + out.string()), out.string());
  EXPECT_FALSE(std::filesystem::exists(out));
}

// --winograd: on, off and auto give the same logits within the f32 tolerance relative to their
// scale; explain lists the Winograd kernels it asked for; an unknown value is one sentence.
TEST(InferCli, WinogradOnOffAndAutoAgree) {
  auto d = temp_dir("winograd");
  const std::string common = "infer --model resnet_cifar --batch 4 --iterations 1 --warmup 0 --topk 0 --output ";
  std::vector<std::vector<float>> outs;
  for (const char* mode : {"off", "on", "auto"}) {
    const std::string path = (d / (std::string(mode) + ".npy")).string();
    Result r = run(common + path + " --winograd " + mode);
    ASSERT_EQ(r.code, 0) << r.output;
    auto t = trident::runtime::read_npy(path);
    const auto* f = reinterpret_cast<const float*>(t.data.data());
    outs.emplace_back(f, f + t.data.size() / 4);
  }
  double scale = 0;
  for (float v : outs[0]) scale = std::max(scale, std::abs(double(v)));
  ASSERT_GT(scale, 0);
  for (size_t m = 1; m < outs.size(); ++m)
    for (size_t i = 0; i < outs[0].size(); ++i)
      EXPECT_NEAR(outs[m][i], outs[0][i], 1e-5 + 1e-4 * scale) << "mode " << m << " logit " << i;

  Result e = run("explain --model resnet_cifar --mode infer --batch 4 --json --winograd on", false);
  ASSERT_EQ(e.code, 0) << e.output;
  nlohmann::json j = nlohmann::json::parse(e.output);
  EXPECT_EQ(j["backend"], "cpu");
  int winograd = 0;
  for (const auto& k : j["kernels"]) winograd += k["implementation"].get<std::string>().rfind("winograd (", 0) == 0;
  if (winograd == 0) GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU";
  EXPECT_GT(winograd, 10) << e.output;  // ResNet-20's 3x3 stride-1 convolutions with 16+ channels

  Result bad = run("infer --model fmnist_cnn --winograd sometimes");
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--winograd: sometimes not in {auto,on,off}"), std::string::npos) << bad.output;
}
