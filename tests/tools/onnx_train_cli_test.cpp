// `trident train --model FILE.onnx`: a network exported from PyTorch trains like a zoo model. Its
// initializers are the initial weights, an eval-mode BatchNormalization trains with batch
// statistics (its running statistics move), and the loss comes down. The models are those
// tests/onnx/make_models.py writes into the build folder (the tests skip without them). A resumed
// run checks that its ONNX file is the one it trained.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <regex>

#include "frontend/onnx/onnx_import.h"
#include "runtime/checkpoint/safetensors.h"
#include "support/onnx_models.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;

// The exported head: Conv, BN (eval export), Relu, MaxPool (ceil_mode), ReduceMean, Gemm, its
// weights in an external data file.
fs::path head_model() {
  const fs::path p = fs::path(TRIDENT_ONNX_MODELS) / "exported_head_op18.onnx";
  return fs::exists(p) ? p : fs::path();
}

const std::string kTrain = "train --synthetic --train-limit 256 --test-limit 64 --batch 32 --threads 1 --model ";

TEST(OnnxTrainCli, StartsFromTheFilesWeightsAndTrainsItsBatchnormWithBatchStatistics) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const fs::path model = head_model();
  if (model.empty()) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const fs::path dir = test_support::fresh_temp_dir("onnx_train");
  const std::string ckpt = (dir / "run.ckpt").string();
  // A learning rate of 1e-30 leaves every weight as it was, to the bit; the statistics still move.
  const auto r = test_support::run_trident(kTrain + model.string() + " --epochs 1 --lr 1e-30 --save " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  const runtime::WeightMap saved = runtime::read_safetensors(ckpt);
  const frontend::OnnxImport imp = frontend::import_onnx(model.string());
  for (const char* name : {"c1.weight", "bn1.weight", "bn1.bias", "fc.w", "fc.b"}) {
    ASSERT_TRUE(saved.count(name) && imp.weights.count(name)) << name;
    EXPECT_EQ(saved.at(name).data, imp.weights.at(name).data) << name << " is not the file's initializer";
  }
  EXPECT_NE(saved.at("bn1.running_mean").data, imp.weights.at("bn1.running_mean").data)
      << "the eval-mode batchnorm must train with batch statistics and update its running mean";
  fs::remove_all(dir);
}

TEST(OnnxTrainCli, TheLossComesDown) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const fs::path model = head_model();
  if (model.empty()) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const auto r = test_support::run_trident(kTrain + model.string() + " --epochs 3 --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<double> losses;
  const std::regex epoch(R"("event":"epoch"[^}]*"loss":([0-9.eE+-]+))");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), epoch); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  ASSERT_EQ(losses.size(), 3u) << r.output;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << r.output;
}

// DenseNet's and ShuffleNet v2's imported ops (make_models.py's pad_block and split_block): a
// pad2d, Pads taken by their readers, channel slices, a Split and concats train from the command
// line as any model does.
TEST(OnnxTrainCli, PadAndChannelSplitModelsTrainAndTheirLossComesDown) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  for (const char* name : {"pad_block_op18.onnx", "split_block_op13.onnx"}) {
    const fs::path model = fs::path(TRIDENT_ONNX_MODELS) / name;
    if (!fs::exists(model)) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
    const auto r = test_support::run_trident(kTrain + model.string() + " --epochs 3 --json", false);
    ASSERT_EQ(r.code, 0) << r.output;
    std::vector<double> losses;
    const std::regex epoch(R"("event":"epoch"[^}]*"loss":([0-9.eE+-]+))");
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), epoch); it != std::sregex_iterator(); ++it)
      losses.push_back(std::stod((*it)[1]));
    ASSERT_EQ(losses.size(), 3u) << r.output;
    EXPECT_LT(losses.back(), 0.8 * losses.front()) << name << ": " << r.output;
  }
}

TEST(OnnxTrainCli, AModelThatIsNotAClassifierIsRefusedWithAReason) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const fs::path model = fs::path(TRIDENT_ONNX_MODELS) / "conv_bn_relu_op13.onnx";  // an NCHW output
  if (!fs::exists(model)) GTEST_SKIP() << "no ONNX test models (needs the .venv)";
  const auto r = test_support::run_trident(kTrain + model.string() + " --epochs 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("one [N, classes] output"), std::string::npos) << r.output;
}

TEST(OnnxTrainCli, AChangedOnnxModelIsRefusedOnResume) {
  REQUIRE_ONNX_MODELS();
  const fs::path d = test_support::fresh_temp_dir("cli_changed_model");
  const fs::path models = test_support::kOnnxModels;
  // The model and the data file its weights live in, under the name the model gives it.
  auto place = [&](const std::string& name) {
    fs::copy_file(models / (name + ".onnx"), d / "model.onnx", fs::copy_options::overwrite_existing);
    fs::copy_file(models / (name + ".onnx.data"), d / (name + ".onnx.data"), fs::copy_options::overwrite_existing);
  };
  place("exported_head_op13");
  const std::string ckpt = (d / "run.ckpt").string();
  const std::string model = (d / "model.onnx").string();
  ASSERT_EQ(test_support::run_trident("train --model " + model + " --synthetic --train-limit 8 --test-limit 4 --batch 4 --epochs 1 "
                        "--threads 1 --save " + ckpt)
                .code,
            0);
  EXPECT_EQ(test_support::run_trident("train --resume " + ckpt + " --epochs 2 --threads 1").code, 0);
  place("exported_head_op18");  // the same shapes, other weights and ops: another file
  const auto changed = test_support::run_trident("train --resume " + ckpt + " --epochs 3 --threads 1");
  EXPECT_EQ(changed.code, 1) << changed.output;
  EXPECT_NE(changed.output.find("the model file '" + model + "' changed since checkpoint"), std::string::npos)
      << changed.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace trident
