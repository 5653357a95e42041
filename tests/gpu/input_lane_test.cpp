// The cuda input lane (backends/input_lane.h) and the training loop that uses it: batches sent
// while a step runs arrive whole and in order, its host buffers are page-locked and taken in
// turn, and training with the next batch uploaded ahead gives bit for bit the parameters of
// uploading each batch between steps, whether the batches come from memory or are sent from an
// image folder's ring where they were made. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#ifdef TRIDENT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/data/dataset.h"
#include "runtime/data/image_folder_batches.h"
#include "runtime/executable.h"
#include "runtime/trainer.h"
#include "support/gpu_compare.h"
#include "support/image_folder.h"
#include "support/stepwise_training.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

std::unique_ptr<runtime::Executable> small_training_step() {
  passes::CompileOptions o = runtime::default_compile_options(passes::Mode::Train);
  o.backend = "cuda";
  return runtime::Executable::compile(frontend::build_model("fmnist_cnn", {.batch = 8}), o, BackendOptions{});
}

// The cuda backend asks the driver for more hardware queues than its default 8 when the process
// loads (cuda_context.cpp), before any CUDA call: with 8, the kernels of nvJPEG's hardware
// decoder could queue behind the whole step beside it. Needs no GPU, only a build with the cuda
// backend.
TEST(CudaInputLane, TheProcessAsksForMoreHardwareQueuesThanTheDriversEight) {
#ifndef TRIDENT_HAVE_CUDA
  GTEST_SKIP() << "this build has no cuda backend";
#endif
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  ASSERT_NE(connections, nullptr);
  EXPECT_GE(std::atoi(connections), 32) << "CUDA_DEVICE_MAX_CONNECTIONS=" << connections
                                        << " (set before the tests started?) lets the decoding wait for the step";
}

TEST(CudaInputLane, DeliversEachBatchWholeAndInOrder) {
  TRIDENT_REQUIRE_GPU();
  auto exe = small_training_step();
  const int images = exe->value_id("images");
  std::unique_ptr<InputLane> lane = exe->make_input_lane(images);
  ASSERT_NE(lane, nullptr) << "the cuda backend has an input lane";
  const TensorView h = exe->host_view(images);
  ASSERT_EQ(lane->bytes(), h.bytes());
  Rng rng(3);
  std::vector<std::vector<float>> batches(5, std::vector<float>(static_cast<size_t>(h.numel())));
  for (auto& b : batches)
    for (float& v : b) v = static_cast<float>(rng.uniform(-1, 1));
  void* previous = nullptr;
  for (size_t k = 0; k < batches.size(); ++k) {
    void* host = lane->host_buffer();
#ifdef TRIDENT_HAVE_CUDA
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, host), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "a lane's host buffer is pageable memory";
#endif
    EXPECT_NE(host, previous) << "two host buffers, taken in turn";
    previous = host;
    std::memcpy(host, batches[k].data(), lane->bytes());
    lane->send();
    EXPECT_THROW(lane->send(), Error) << "a second send would overwrite the undelivered batch";
    exe->take_input(*lane, images);
    exe->download(images);
    EXPECT_EQ(std::memcmp(h.data, batches[k].data(), h.bytes()), 0) << "batch " << k;
    lane->mark_step_end();
    EXPECT_GE(lane->device_wait_seconds(), 0.0);
  }
  EXPECT_THROW(exe->take_input(*lane, images), Error) << "nothing was sent since the last delivery";
  EXPECT_THROW(exe->take_input(*lane, exe->value_id("labels")), Error) << "a lane fills a tensor of its own size";
}

// A batch sent as uint8 pixels arrives as x · scale + shift of its channel, each value as the
// host computes it; the pixels' memory is read only until send_pixels returns.
TEST(CudaInputLane, PixelsArriveNormalised) {
  TRIDENT_REQUIRE_GPU();
  passes::CompileOptions o = runtime::default_compile_options(passes::Mode::Train);
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(frontend::build_model("resnet_cifar", {.batch = 8}), o, BackendOptions{});
  const int images = exe->value_id("images");
  std::unique_ptr<InputLane> lane = exe->make_input_lane(images);
  ASSERT_TRUE(lane->takes_pixels());
  const TensorView h = exe->host_view(images);
  const size_t count = static_cast<size_t>(h.numel());
  PixelBatch batch;
  batch.rows = 8;
  batch.image_size = 32;
  ASSERT_EQ(count, size_t{8} * 32 * 32 * 3) << "resnet_cifar takes 32x32 RGB";
  const float scale[3] = {0.017f, 0.0175f, 0.0174f}, shift[3] = {-2.1f, -2.03f, -1.8f};
  std::copy(scale, scale + 3, batch.scale);
  std::copy(shift, shift + 3, batch.shift);
  for (int k = 0; k < 3; ++k) {
    std::vector<uint8_t> px(count);
    for (size_t i = 0; i < count; ++i) px[i] = static_cast<uint8_t>((i * 7 + static_cast<size_t>(k) * 13) % 256);
    batch.pixels = px.data();
    lane->send_pixels(batch);
    std::fill(px.begin(), px.end(), uint8_t{0});  // read already: rewriting it changes nothing sent
    exe->take_input(*lane, images);
    exe->download(images);
    const float* got = h.as<float>();
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>((i * 7 + static_cast<size_t>(k) * 13) % 256) * scale[i % 3] + shift[i % 3];
      ASSERT_NEAR(got[i], want, 1e-6f * std::max(1.0f, std::abs(want))) << "batch " << k << ", value " << i;
    }
    lane->mark_step_end();
  }
  batch.rows = 4;
  EXPECT_THROW(lane->send_pixels(batch), Error) << "a batch of another size is refused";
  lane->release_host_memory();
}

// Two runs of the same training, f32 with cuDNN's first plans (so both run the same engines, and
// recorded steps equal direct ones bit for bit: network_test.cpp).
TEST(CudaInputLane, UploadingAheadTrainsTheSameParametersAsUploadingBetweenSteps) {
  TRIDENT_REQUIRE_GPU();
  const data::Dataset ds = data::make_synthetic(384, 28, 28, 1, 10, 5);
  auto train = [&](bool ahead, std::vector<runtime::EpochStats>& epochs) {
    runtime::TrainConfig cfg;
    cfg.compile.backend = "cuda";
    cfg.backend_options.autotune = false;
    cfg.upload_ahead = ahead;
    runtime::Trainer t(frontend::build_model("fmnist_cnn", {64}), cfg);
    data::BatchIterator it(ds, 64, true, 1, true);
    for (int e = 0; e < 2; ++e) epochs.push_back(t.train_epoch(it, e, 2));
    return t.train_executable().export_weights();
  };
  std::vector<runtime::EpochStats> ahead_epochs, between_epochs;
  const WeightMap ahead = train(true, ahead_epochs), between = train(false, between_epochs);
  ASSERT_EQ(ahead.size(), between.size());
  for (const auto& [name, t] : ahead) {
    ASSERT_TRUE(between.count(name)) << name;
    EXPECT_EQ(t.data, between.at(name).data) << name << " differs after two epochs";
  }
  for (size_t e = 0; e < ahead_epochs.size(); ++e) {
    EXPECT_EQ(ahead_epochs[e].loss, between_epochs[e].loss) << "epoch " << e;
    EXPECT_EQ(ahead_epochs[e].accuracy, between_epochs[e].accuracy) << "epoch " << e;
    EXPECT_GE(ahead_epochs[e].data_wait_seconds, 0.0);
    EXPECT_LE(ahead_epochs[e].data_wait_seconds, ahead_epochs[e].seconds);
  }
}

// The trainer queues step k + 1 before it reads step k back, with the next batch sent through the
// lane meanwhile: each step is scored with its own loss, logits and labels, and the parameters
// are those of steps sent and read back one at a time, bit for bit (CUDA graphs on, as by default).
TEST(CudaInputLane, QueuedStepsScoreAndTrainAsStepsRunOneByOne) {
  TRIDENT_REQUIRE_GPU();
  runtime::TrainConfig cfg;
  cfg.compile.backend = "cuda";
  cfg.backend_options.autotune = false;
  const data::Dataset ds = data::make_synthetic(384, 28, 28, 1, 10, 5);
  test_support::expect_queued_steps_as_one_by_one(frontend::build_model("fmnist_cnn", {64}), cfg, ds, 64, 2);
}

// The wait an epoch reports is for its own batches: the pause between two epochs (here a second
// of other work, as an evaluation would be) is not counted as the next epoch's wait for data.
TEST(CudaInputLane, AnEpochsDataWaitLeavesOutThePauseBeforeIt) {
  TRIDENT_REQUIRE_GPU();
  const data::Dataset ds = data::make_synthetic(256, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.compile.backend = "cuda";
  cfg.backend_options.autotune = false;
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {64}), cfg);
  data::BatchIterator it(ds, 64, true, 1, true);
  t.train_epoch(it, 0, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const runtime::EpochStats st = t.train_epoch(it, 1, 2);
  EXPECT_LT(st.data_wait_seconds, 0.5) << "the second before the epoch counted as waiting for its data";
  EXPECT_LE(st.data_wait_seconds, st.seconds);
}

// An image folder hands its batches out in place: the lane copies them from the loader's ring
// (page-locked where they lie) instead of a host buffer of its own.
TEST(CudaInputLane, BatchesSentFromAnImageFoldersRingTrainTheSameParameters) {
  TRIDENT_REQUIRE_GPU();
  const std::filesystem::path d = test_support::fresh_temp_dir("gpu_lane_folder");
  test_support::write_class_images(d, "train", 10, 10, 40, 36);
  const data::ImageFolderSplit split = data::scan_image_folder(d.string(), "train");
  auto train = [&](bool ahead) {
    runtime::TrainConfig cfg;
    cfg.compile.backend = "cuda";
    cfg.backend_options.autotune = false;
    cfg.upload_ahead = ahead;
    cfg.decode = runtime::TrainConfig::Decode::cpu;  // the floats the loader made, either way
    cfg.send_pixels = false;
    runtime::Trainer t(frontend::build_model("resnet_cifar", {16}), cfg);
    data::ImageStreamOptions o;
    o.image_size = 32;
    o.batch = 16;
    o.workers = 2;
    data::ImageFolderBatches batches(split, o);
    EXPECT_TRUE(batches.hands_out_in_place());
    for (int e = 0; e < 2; ++e) {
      const runtime::EpochStats st = t.train_epoch(batches, e, 2);
      EXPECT_TRUE(std::isfinite(st.loss));
      EXPECT_LE(st.data_wait_seconds, st.seconds);
    }
    return t.train_executable().export_weights();
  };
  const WeightMap ahead = train(true), between = train(false);
  ASSERT_EQ(ahead.size(), between.size());
  for (const auto& [name, t] : ahead) {
    ASSERT_TRUE(between.count(name)) << name;
    EXPECT_EQ(t.data, between.at(name).data) << name << " differs after two epochs";
  }
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace trident
