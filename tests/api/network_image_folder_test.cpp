// The library does what `trident train` does, through the same loop: an image folder trains
// (its classes and crops the network's), evaluates after every epoch (reported to a callback),
// writes a checkpoint and a metrics file; evaluate() scores it again; the weights go out as a
// PyTorch state dict and as ONNX and come back in giving the same outputs; and a state dict of
// another head loads only when told to skip what does not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_import.h"
#include "support/error_of.h"
#include "support/image_folder.h"
#include "support/temp_dir.h"
#include "trident/trident.h"

namespace {

namespace fs = std::filesystem;

trident::CompileOptions options(trident::Mode mode, int64_t batch) {
  trident::CompileOptions o;
  o.mode = mode;
  o.device = "cpu_ref";
  o.batch = batch;
  o.learning_rate = 0.05;
  return o;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.11f * static_cast<float>(i));
  return v;
}

// fmnist_cnn taking the folder's 3 x 16 x 16 crops and its classes.
trident::Model folder_model(int64_t classes) { return trident::Model::zoo("fmnist_cnn", {16, 16, 3, classes}); }

}  // namespace

TEST(ApiImageFolder, TrainsEvaluatesAndExportsAsTheCommandLineDoes) {
  const fs::path d = trident::test_support::fresh_temp_dir("api_folder");
  trident::test_support::write_class_images(d / "images", "train", 2, 12, 24, 24);
  trident::test_support::write_class_images(d / "images", "val", 2, 4, 24, 24);
  trident::Network net(folder_model(2), options(trident::Mode::training, 4));
  trident::TrainOptions t;
  t.epochs = 2;
  t.save_path = (d / "run.ckpt").string();
  t.log_path = (d / "metrics.jsonl").string();
  std::vector<int64_t> seen;
  t.on_epoch = [&](const trident::EpochResult& e) { seen.push_back(e.epoch); };
  const trident::TrainResult r = net.train((d / "images").string(), t);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.eval_split, "val");
  EXPECT_EQ(r.test_images, 8);
  EXPECT_EQ(r.epochs[1].eval_images, 8);
  EXPECT_EQ(r.epochs[1].eval_accuracy, r.test_accuracy);
  EXPECT_GT(r.epochs[0].images_per_second, 0);
  EXPECT_TRUE(fs::exists(t.save_path));
  std::ifstream log(t.log_path);
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) lines += line.find("\"eval_accuracy\"") != std::string::npos;
  EXPECT_EQ(lines, 2);

  const trident::EvalResult again = net.evaluate((d / "images").string());
  EXPECT_EQ(again.split, "val");
  EXPECT_EQ(again.images, 8);
  EXPECT_EQ(again.accuracy, r.test_accuracy);
  EXPECT_NEAR(again.loss, r.test_loss, 1e-9);
  const trident::EvalResult some = net.evaluate((d / "images").string(), {.limit = 4});
  EXPECT_EQ(some.images, 4);

  // The image size is the network's: another is one sentence.
  trident::TrainOptions wrong;
  wrong.image_size = 24;
  EXPECT_NE(trident::test_support::error_of([&] { net.train((d / "images").string(), wrong); })
                .find("TrainOptions::image_size is 24, but this network takes 16x16 images"),
            std::string::npos);

  // Decoding on the GPU needs a GPU backend; an unknown word is one sentence either way.
  trident::TrainOptions on_gpu;
  on_gpu.decode = "gpu";
  EXPECT_NE(trident::test_support::error_of([&] { net.train((d / "images").string(), on_gpu); })
                .find("decoding on the GPU (--decode gpu) needs a GPU backend"),
            std::string::npos);
  on_gpu.decode = "sometimes";
  EXPECT_NE(trident::test_support::error_of([&] { net.train((d / "images").string(), on_gpu); })
                .find("TrainOptions::decode is 'sometimes'; it takes auto, gpu or cpu"),
            std::string::npos);
  EXPECT_EQ(r.epochs[0].decoded_by, "") << "a host backend has no lane to decode for";

  // Out as a state dict and as ONNX, back in: the same outputs.
  const std::vector<float> x = ramp(net.input_size());
  const std::vector<float> want = net.infer(x);
  net.export_state_dict((d / "state.safetensors").string());
  trident::Network fresh(folder_model(2), options(trident::Mode::inference, 4));
  EXPECT_TRUE(fresh.load_weights((d / "state.safetensors").string()).empty());
  EXPECT_EQ(fresh.infer(x), want);
  if (trident::frontend::onnx_import_available()) {
    net.export_onnx((d / "model.onnx").string());
    trident::Network from_onnx(trident::Model::onnx((d / "model.onnx").string()), options(trident::Mode::inference, 4));
    const std::vector<float> got = from_onnx.infer(x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << i;
  }
  fs::remove_all(d);
}

TEST(ApiImageFolder, AnotherHeadLoadsOnlyWhenSkipped) {
  const fs::path d = trident::test_support::fresh_temp_dir("api_fine_tune");
  trident::Network three(folder_model(3), options(trident::Mode::inference, 2));
  three.export_state_dict((d / "three.safetensors").string());
  trident::Network two(folder_model(2), options(trident::Mode::training, 2));
  const std::string refused = trident::test_support::error_of([&] { two.load_weights((d / "three.safetensors").string()); });
  EXPECT_NE(refused.find("fc.bias f32[3] (the model's f32[2])"), std::string::npos) << refused;
  EXPECT_NE(refused.find("skip_mismatched"), std::string::npos) << refused;
  const std::vector<std::string> skipped = two.load_weights((d / "three.safetensors").string(), {.skip_mismatched = true});
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].substr(0, 8), "fc.bias ");
  EXPECT_EQ(skipped[1].substr(0, 10), "fc.weight ");
  fs::remove_all(d);
}
