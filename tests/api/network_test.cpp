// Tests of the public API (include/trident/), linked against libtrident.so as a user links it:
// inference equals the internal Runner's on the same weights, in both layouts; training steps
// lower the loss; epochs over a dataset folder learn; saved weights load back to the same
// outputs; int8 inference calibrates on the images it is given; and bad input is a
// trident::Error whose message is one sentence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_layout.h"
#include "frontend/zoo.h"
#include "runtime/data/dataset.h"
#include "runtime/runner.h"
#include "support/error_of.h"
#include "support/temp_dir.h"
#include "trident/trident.h"

namespace {

// A deterministic batch that is not constant, so a wrong layout or a dropped row shows.
std::vector<float> ramp(size_t n, float phase = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

// That `f` throws a trident::Error whose message is one sentence: one line, holding each of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = trident::test_support::error_of(f);
  ASSERT_FALSE(msg.empty()) << "no trident::Error was thrown";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

trident::CompileOptions inference_on(const std::string& device, int64_t batch, uint64_t seed = 1) {
  trident::CompileOptions o;
  o.device = device;
  o.batch = batch;
  o.seed = seed;
  return o;
}

trident::CompileOptions training_on(const std::string& device, int64_t batch, uint64_t seed = 1) {
  trident::CompileOptions o = inference_on(device, batch, seed);
  o.mode = trident::Mode::training;
  return o;
}

std::filesystem::path temp_file(const std::string& name) {
  return trident::test_support::fresh_temp_dir("api_" + name) / (name + ".safetensors");
}

}  // namespace

TEST(Api, InferenceEqualsTheRunnerOnTheSameWeights) {
  const trident::Model model = trident::Model::zoo("fmnist_cnn");
  trident::Network net(model, inference_on("cpu_ref", 3, 7));
  EXPECT_EQ(net.backend(), "cpu_ref");
  EXPECT_EQ(net.input_shape(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(net.input_shape(trident::Layout::nhwc), (std::vector<int64_t>{3, 28, 28, 1}));
  EXPECT_EQ(net.output_shape(), (std::vector<int64_t>{3, 10}));

  trident::runtime::RunnerOptions ro;
  ro.compile.backend = "cpu_ref";
  trident::runtime::Runner runner(trident::frontend::build_model("fmnist_cnn", {3}), ro);
  runner.init_random_weights(7);
  const std::vector<float> images = ramp(net.input_size());
  trident::HostTensor t{{3, 1, 28, 28}, trident::DType::f32, std::vector<std::byte>(images.size() * 4)};
  std::memcpy(t.data.data(), images.data(), t.data.size());
  runner.set_input(t, trident::runtime::Layout::NCHW);
  runner.run();
  const trident::HostTensor ref = runner.output(0);
  std::vector<float> expected(net.output_size());
  ASSERT_EQ(ref.data.size(), expected.size() * 4);
  std::memcpy(expected.data(), ref.data.data(), ref.data.size());

  EXPECT_EQ(net.infer(images), expected);  // the same kernels on the same bytes: bit for bit
  // The same images given in NHWC: the same logits.
  const trident::HostTensor nhwc = trident::nchw_to_nhwc(t);
  std::vector<float> nhwc_images(images.size());
  std::memcpy(nhwc_images.data(), nhwc.data.data(), nhwc.data.size());
  EXPECT_EQ(net.infer(nhwc_images, trident::Layout::nhwc), expected);
  // Rows of different images differ, so the comparison above could tell rows apart.
  EXPECT_NE(std::vector<float>(expected.begin(), expected.begin() + 10),
            std::vector<float>(expected.begin() + 10, expected.begin() + 20));

  const std::vector<float> p = net.probabilities(images);
  for (int r = 0; r < 3; ++r) {
    const double sum = std::accumulate(p.begin() + r * 10, p.begin() + r * 10 + 10, 0.0);
    EXPECT_NEAR(sum, 1.0, 1e-5);
    const auto top = std::max_element(p.begin() + r * 10, p.begin() + r * 10 + 10) - (p.begin() + r * 10);
    EXPECT_EQ(top, std::max_element(expected.begin() + r * 10, expected.begin() + r * 10 + 10) -
                       (expected.begin() + r * 10));
  }
}

TEST(Api, TrainStepLowersTheLossOfABatch) {
  // One batch again and again at a rate it can descend steadily (at 0.05 the momentum carries
  // the loss of eight images up and down).
  trident::CompileOptions o = training_on("cpu", 8);
  o.learning_rate = 0.01;
  trident::Network net(trident::Model::zoo("fmnist_cnn"), o);
  const std::vector<float> images = ramp(net.input_size(), 0.5f);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<float> before = net.infer(images);
  std::vector<float> losses;
  for (int i = 0; i < 6; ++i) losses.push_back(net.train_step(images, labels));
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NEAR(losses[0], std::log(10.0), 1.0);  // freshly initialised: near guessing
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
  EXPECT_LT(losses.back(), 0.5f * losses[0]);
  // infer() runs the trained weights, not those it ran before the steps.
  EXPECT_NE(net.infer(images), before);
}

TEST(Api, SavedWeightsLoadBackToTheSameOutputs) {
  const trident::Model model = trident::Model::zoo("fmnist_cnn");
  trident::Network trained(model, training_on("cpu_ref", 4, 3));
  const std::vector<float> images = ramp(trained.input_size());
  for (int i = 0; i < 2; ++i) trained.train_step(images, std::vector<int32_t>{1, 2, 3, 4});
  const std::filesystem::path file = temp_file("round_trip");
  trained.save_weights(file.string());
  const std::vector<float> want = trained.infer(images);

  // Another seed gives other outputs until the file is loaded, into either mode.
  trident::Network inference(model, inference_on("cpu_ref", 4, 99));
  EXPECT_NE(inference.infer(images), want);
  inference.load_weights(file.string());
  EXPECT_EQ(inference.infer(images), want);
  trident::Network resumed(model, training_on("cpu_ref", 4, 99));
  resumed.load_weights(file.string());
  EXPECT_EQ(resumed.infer(images), want);
  // Momentum came along too: the loss after the next update, which reads it, is the same.
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(resumed.train_step(images, std::vector<int32_t>{1, 2, 3, 4}),
              trained.train_step(images, std::vector<int32_t>{1, 2, 3, 4}));

  // An inference network's file lacks momentum; a training network takes it all the same.
  const std::filesystem::path inference_file = temp_file("inference_weights");
  inference.save_weights(inference_file.string());
  trident::Network fresh(model, training_on("cpu_ref", 4, 5));
  fresh.load_weights(inference_file.string());
  EXPECT_EQ(fresh.infer(images), want);
  std::filesystem::remove_all(file.parent_path());
  std::filesystem::remove_all(inference_file.parent_path());
}

TEST(Api, TrainsForEpochsOverADatasetFolder) {
  const std::string dir = trident::data::default_fashion_mnist_dir();
  if (!std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << dir << " (scripts/setup.sh installs it)";
  trident::CompileOptions o = training_on("cpu", 32);
  o.learning_rate = 0.1;
  trident::Network net(trident::Model::zoo("fmnist_cnn"), o);
  trident::TrainOptions t;
  t.epochs = 2;
  t.train_limit = 1024;
  t.test_limit = 256;
  const trident::TrainResult r = net.train(dir, t);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.epochs[1].epoch, 2);
  EXPECT_LT(r.epochs[1].loss, r.epochs[0].loss);
  EXPECT_EQ(r.test_images, 256);
  EXPECT_GT(r.test_accuracy, 0.4);  // ten classes: guessing scores 0.1

  // The wrong data for the network is one sentence naming both.
  trident::Network five(trident::Model::zoo("fmnist_cnn", {.classes = 5}), training_on("cpu", 32));
  expect_error([&] { five.train(dir, t); }, {"10 classes", "does not fit", "5 classes"});
}

// Inference takes any number of images, a batch at a time (the last padded): each image's result
// is what a network of that batch gives it.
TEST(Api, InfersAnyNumberOfImages) {
  const trident::Model model = trident::Model::zoo("fmnist_cnn");
  trident::Network four(model, inference_on("cpu_ref", 4, 3)), ten(model, inference_on("cpu_ref", 10, 3));
  const std::vector<float> x = ramp(ten.input_size());
  const std::vector<float> want = ten.infer(x);
  EXPECT_EQ(four.infer(x), want);  // 4 + 4 + 2
  const std::vector<float> one(x.begin(), x.begin() + static_cast<long>(four.input_size() / 4));
  EXPECT_EQ(four.infer(one), std::vector<float>(want.begin(), want.begin() + 10));
  const std::vector<float> p = four.probabilities(x);
  ASSERT_EQ(p.size(), 100u);
  float row = 0;
  for (int k = 0; k < 10; ++k) row += p[90 + k];
  EXPECT_NEAR(row, 1.0f, 1e-5);
  expect_error([&] { four.infer(std::vector<float>(one.size() + 1)); }, {"no whole number of images", "784 an image"});
}

TEST(Api, BadInputIsAnErrorInOneSentence) {
  const trident::Model model = trident::Model::zoo("fmnist_cnn");
  trident::Network net(model, inference_on("cpu", 2));
  expect_error([&] { net.infer(std::vector<float>(10)); }, {"holds 10 floats", "takes 1568", "[2,1,28,28]", "NCHW"});
  std::vector<float> out(3);
  expect_error([&] { net.infer(std::vector<float>(net.input_size()), out); }, {"holds 3 floats", "[2,10]"});
  expect_error([] { trident::Model::zoo("no_such_net"); }, {"unknown model 'no_such_net'", "fmnist_cnn"});
  expect_error([&] { trident::Network(model, inference_on("tpu", 1)); }, {"unknown device 'tpu'", "cpu_ref", "cuda"});
  trident::CompileOptions half = inference_on("cpu", 1);
  half.precision = trident::Precision::fp16;
  expect_error([&] { trident::Network(model, half); }, {"fp16", "cuda"});
  expect_error([&] { trident::Network(model, inference_on("cpu", 0)); }, {"CompileOptions::batch", "not 0"});
  expect_error([&] { net.train_step(std::vector<float>(net.input_size()), std::vector<int32_t>{0, 1}); },
               {"train_step", "Mode::training"});
  expect_error([&] { net.infer_device(nullptr, nullptr); }, {"infer_device", "cuda", "infer"});
  expect_error([&] { net.load_weights("/nonexistent/weights.safetensors"); }, {"/nonexistent/weights.safetensors"});

  trident::Network trainer(model, training_on("cpu", 2));
  const std::vector<float> images(trainer.input_size());
  expect_error([&] { trainer.train_step(images, std::vector<int32_t>{0}); }, {"1 labels", "batch of 2"});
  expect_error([&] { trainer.train_step(images, std::vector<int32_t>{0, 10}); }, {"label 10", "0 to 9"});
  expect_error([&] { trainer.set_learning_rate(-1); }, {"learning rate", "not -1"});
  // A file of another network names the tensor that does not fit.
  const std::filesystem::path file = temp_file("other_net");
  trident::Network(trident::Model::zoo("fmnist_cnn", {.classes = 5}), inference_on("cpu", 2)).save_weights(file.string());
  expect_error([&] { net.load_weights(file.string()); }, {file.string(), "does not fit"});
  std::filesystem::remove_all(file.parent_path());
  // Nothing was changed by the refusals: the network still runs.
  EXPECT_EQ(net.infer(std::vector<float>(net.input_size())).size(), net.output_size());
}

// Precision::int8: calibrated on the images CompileOptions hold, the network runs its
// convolutions in int8 and stays near the fp32 network of the same weights; what the
// calibration needs and refuses is one sentence each.
TEST(Api, Int8InferenceCalibratesOnTheGivenImages) {
  const trident::Model model = trident::Model::zoo("resnet_cifar");
  trident::Network f32(model, inference_on("cpu", 4, 5));
  const std::vector<float> calibration = ramp(f32.input_size() * 16, 0.3f);  // 64 images
  trident::CompileOptions o = inference_on("cpu", 4, 5);
  o.precision = trident::Precision::int8;
  o.calibration_images = calibration;
  trident::Network int8(model, o);
  ASSERT_EQ(int8.notices().size(), 1u);
  EXPECT_NE(int8.notices()[0].find("calibrated on 64 images (entropy)"), std::string::npos) << int8.notices()[0];
  const std::vector<float> x = ramp(f32.input_size(), 1.1f);
  const std::vector<float> want = f32.infer(x), got = int8.infer(x);
  ASSERT_EQ(got.size(), want.size());
  float diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  EXPECT_GT(diff, 0.0f) << "int8 gave the f32 outputs bit for bit: nothing was quantized";
  EXPECT_LE(diff, 0.1f * scale);

  trident::CompileOptions none = o;
  none.calibration_images = {};
  expect_error([&] { trident::Network(model, none); }, {"CompileOptions::calibration_images", "a few hundred"});
  trident::CompileOptions ragged = o;
  ragged.calibration_images = std::span<const float>(calibration).first(calibration.size() - 1);
  expect_error([&] { trident::Network(model, ragged); }, {"not a whole number", "[3,32,32]"});
  trident::CompileOptions bad = o;
  bad.calibrator = "median";
  expect_error([&] { trident::Network(model, bad); }, {"median", "entropy"});
  trident::CompileOptions f32_with_images = inference_on("cpu", 4, 5);
  f32_with_images.calibration_images = calibration;
  expect_error([&] { trident::Network(model, f32_with_images); }, {"are for Precision::int8"});
  trident::CompileOptions train = o;
  train.mode = trident::Mode::training;
  expect_error([&] { trident::Network(model, train); }, {"int8 is for inference"});
}

TEST(Api, OnnxModelsAreReadWhenCompiled) {
#ifdef TRIDENT_HAVE_ONNX
  const trident::Model model = trident::Model::onnx("/nonexistent/model.onnx");
  EXPECT_EQ(model.name(), "/nonexistent/model.onnx");
  expect_error([&] { trident::Network(model, inference_on("cpu", 1)); }, {"/nonexistent/model.onnx"});
#else
  expect_error([] { trident::Model::onnx("/nonexistent/model.onnx"); }, {"without ONNX support"});
#endif
}

TEST(Api, ZooModelsAreListed) {
  const std::vector<trident::ZooModel> models = trident::Model::zoo_models();
  ASSERT_FALSE(models.empty());
  bool found = false;
  for (const trident::ZooModel& m : models)
    if (m.name == "fmnist_cnn") found = m.height == 28 && m.width == 28 && m.channels == 1 && m.classes == 10;
  EXPECT_TRUE(found);
}
