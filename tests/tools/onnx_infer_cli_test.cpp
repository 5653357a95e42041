// `trident infer MODEL.onnx` and `trident explain MODEL.onnx` through the real binary, on the
// models tests/onnx/make_models.py writes into the build folder (the tests skip without them):
// outputs must match the stored onnxruntime references, read from an NCHW .npy input.
#include <gtest/gtest.h>

#include "support/run_binary.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "frontend/onnx/onnx_import.h"
#include "runtime/npy.h"
#include "support/onnx_bytes.h"
#include "support/temp_dir.h"

namespace {

using Result = trident::test_support::RunResult;
Result run(const std::string& args, bool merge = true) {
  return trident::test_support::run_trident(args, merge);
}

namespace fs = std::filesystem;

std::vector<float> raw_floats(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

}  // namespace

TEST(OnnxInferCli, MatchesOnnxruntimeReference) {
  const fs::path dir = TRIDENT_ONNX_MODELS;
  const fs::path manifest = dir / "manifest.json";
  if (!fs::exists(manifest)) GTEST_SKIP() << "no ONNX test models in " << dir << " (needs the .venv)";
  nlohmann::json m = nlohmann::json::parse(std::ifstream(manifest));
  for (const auto& model : m["models"]) {
    if (model["name"] != "conv_bn_relu_op13") continue;
    for (const auto& ref : model["refs"]) {
      const std::string stem = "conv_bn_relu_op13.b" + std::to_string(ref["batch"].get<int>());
      const std::vector<float> x = raw_floats(dir / (stem + ".input.bin"));
      const std::vector<float> y = raw_floats(dir / (stem + ".output.bin"));
      ASSERT_FALSE(y.empty()) << stem;
      trident::runtime::HostTensor in{ref["input_shape"].get<trident::Shape>(), trident::DType::f32,
                                      std::vector<std::byte>(x.size() * 4)};
      std::memcpy(in.data.data(), x.data(), x.size() * 4);
      const fs::path work = fs::temp_directory_path() / "trident_onnx_infer_cli";
      fs::create_directories(work);
      trident::runtime::write_npy((work / "x.npy").string(), in);
      Result r = run("infer " + (dir / "conv_bn_relu_op13.onnx").string() + " --json --iterations 2 --warmup 1 --input " +
              (work / "x.npy").string() + " --output " + (work / "y.npy").string());
      ASSERT_EQ(r.code, 0) << r.output;
      nlohmann::json j = nlohmann::json::parse(r.output);
      EXPECT_EQ(j["source"], "onnx");
      EXPECT_TRUE(j["latency_ms"].contains("p99"));
      auto out = trident::runtime::read_npy((work / "y.npy").string());
      EXPECT_EQ(out.shape, ref["output_shape"].get<trident::Shape>());
      ASSERT_EQ(out.data.size(), y.size() * 4);
      const auto* o = reinterpret_cast<const float*>(out.data.data());
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(o[i], y[i], 1e-4f + 1e-4f * std::fabs(y[i])) << "element " << i;
    }
    Result e = run("explain " + (dir / "conv_bn_relu_op13.onnx").string() + " --json");
    ASSERT_EQ(e.code, 0) << e.output;
    EXPECT_TRUE(nlohmann::json::accept(e.output)) << e.output;
    return;
  }
  GTEST_SKIP() << "conv_bn_relu_op13 is not among the ONNX test models";
}

// explain --mode train imports an ONNX model as train does: an eval export's batchnorm takes its
// training form, so the report shows the training fusion (here Conv → BN → Clip(0, 6), ReLU6's
// cbr) instead of an autodiff failure.
TEST(OnnxInferCli, ExplainForTrainingShowsTheTrainingFusions) {
  const fs::path model = fs::path(TRIDENT_ONNX_MODELS) / "mobile_block_op13.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const Result e = run("explain " + model.string() + " --mode train --json");
  ASSERT_EQ(e.code, 0) << e.output;
  const nlohmann::json j = nlohmann::json::parse(e.output);
  bool cbr = false;
  for (const auto& f : j["fusions"]) cbr = cbr || f["pattern"] == "conv-bn-clip";
  EXPECT_TRUE(cbr) << e.output;
}

// A model with a symbolic batch whose Conv output has 2^64 elements at --batch 65536: explain
// and infer refuse it with a sentence instead of planning a buffer from a wrapped count.
TEST(OnnxInferCli, ABatchThatOverflowsAnOutputIsOneSentence) {
  if (!trident::frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const fs::path dir = trident::test_support::fresh_temp_dir("cli_overflow");
  const fs::path model = dir / "wide.onnx";
  std::ofstream(model, std::ios::binary) << trident::test_support::conv_model_bytes(0, 64, 2, int64_t{1} << 20);
  for (const std::string cmd : {"explain", "infer"}) {
    const Result r = run(cmd + " " + model.string() + " --batch 65536");
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("2^40 elements"), std::string::npos) << cmd << ": " << r.output;
  }
}

// onnxruntime's QDQ ResNet-18: `trident infer` runs it in int8 with the model's own scales and
// says so (JSON and text); --precision int8 with --calibration on it is one sentence; explain
// lists the convolutions that took their input pair, the epilogues that took the pairs (and
// residual adds) after them, and why the image's convolution did not.
TEST(OnnxInferCli, AQdqModelRunsInInt8WithItsOwnScales) {
  const fs::path model = fs::path(TRIDENT_ONNX_MODELS) / "resnet18_qdq.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const Result r = run("infer " + model.string() + " --json --iterations 1 --warmup 0", false);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["int8"]["scales"], "model");
  EXPECT_EQ(j["int8"]["int8_convolutions"], 19);
  EXPECT_EQ(j["int8"]["f32_convolutions"], 1);
  const Result text = run("infer " + model.string() + " --iterations 1 --warmup 0");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("int8: 19 convolutions in int8, 1 in f32; scales from the model's"), std::string::npos)
      << text.output;
  const fs::path dir = trident::test_support::fresh_temp_dir("cli_qdq");
  trident::runtime::HostTensor images{{2, 3, 224, 224}, trident::DType::f32, std::vector<std::byte>(2 * 3 * 224 * 224 * 4)};
  trident::runtime::write_npy((dir / "calib.npy").string(), images);
  const Result twice = run("infer " + model.string() + " --precision int8 --calibration " + (dir / "calib.npy").string());
  EXPECT_EQ(twice.code, 1) << twice.output;
  EXPECT_NE(twice.output.find("quantized already"), std::string::npos) << twice.output;
  const Result e = run("explain " + model.string() + " --json", false);
  ASSERT_EQ(e.code, 0) << e.output;
  const nlohmann::json x = nlohmann::json::parse(e.output);
  int int8 = 0, chains = 0, image = 0;  // each convolution's input, and its epilogue taking the pairs after it
  for (const auto& f : x["fusions"]) {
    int8 += f["pattern"] == "conv2d in int8";
    chains += f["pattern"] == "conv-grids in int8";
  }
  EXPECT_EQ(chains, 19) << e.output;
  for (const auto& f : x["rejections"])
    image += f["pass"] == "quantize_int8" && f["reason"].get<std::string>().find("the image itself") != std::string::npos;
  EXPECT_EQ(int8, 19) << e.output;
  EXPECT_EQ(image, 1) << e.output;
}

// `trident quantize`: onnxruntime's check of the file it writes is tests/onnx/check_export.py;
// here its refusals, one sentence each: a model quantized already, an output that is no .onnx,
// a calibration of the wrong image size, and no calibration at all.
TEST(OnnxInferCli, QuantizeRefusalsAreOneSentence) {
  const fs::path dir = fs::path(TRIDENT_ONNX_MODELS);
  if (!fs::exists(dir / "resnet18_qdq.onnx")) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const fs::path work = trident::test_support::fresh_temp_dir("cli_quantize");
  trident::runtime::HostTensor small{{2, 3, 10, 10}, trident::DType::f32, std::vector<std::byte>(2 * 3 * 10 * 10 * 4)};
  trident::runtime::write_npy((work / "small.npy").string(), small);
  const std::string calib = " --calibration " + (work / "small.npy").string();
  struct Bad {
    std::string args, says;
  };
  const Bad bad[] = {
      {(dir / "resnet18_qdq.onnx").string() + calib + " --output " + (work / "q.onnx").string(), "quantized already"},
      {(dir / "conv_bn_relu_op13.onnx").string() + calib + " --output " + (work / "q.txt").string(),
       "must be an .onnx file"},
      {(dir / "resnet18_eval.onnx").string() + calib + " --output " + (work / "q.onnx").string(),
       "the calibration images have shape [2,3,10,10]"},
      {(dir / "conv_bn_relu_op13.onnx").string() + " --output " + (work / "q.onnx").string(), "--calibration"},
  };
  for (const Bad& b : bad) {
    const Result r = run("quantize " + b.args);
    EXPECT_NE(r.code, 0) << b.args;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
  EXPECT_FALSE(fs::exists(work / "q.onnx"));
}
