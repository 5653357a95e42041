// An image folder's batches handed out as uint8 pixels for a device that normalises them
// (BatchSource::next_pixels): the resampling rounded to bytes is the float resampling to within
// half a level, a pixel batch normalised is the float batch to within half a level for training
// and evaluation (the same crops, flips and labels), the bytes do not depend on the worker
// count, a data-parallel rank gets its rows, and the forms of one epoch refuse each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "core/error.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"
#include "runtime/data/image_transform.h"
#include "runtime/data/sharded_batches.h"
#include "support/error_of.h"
#include "support/image_folder.h"
#include "support/temp_dir.h"

using namespace trident::data;
using trident::PixelBatch;
using trident::test_support::error_of;
using trident::test_support::fresh_temp_dir;
using trident::test_support::write_class_images;
using trident::test_support::write_file;
namespace fs = std::filesystem;

namespace {

constexpr Normalisation kIdentity = {{0, 0, 0}, {1.0f / 255, 1.0f / 255, 1.0f / 255}};

ImageStreamOptions options(bool train, int workers) {
  ImageStreamOptions o;
  o.image_size = 24;
  o.batch = 6;
  o.train = train;
  o.seed = 11;
  o.workers = workers;
  o.depth = 2;
  return o;
}

struct Epoch {
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<std::vector<float>> floats, scale_shift;
  std::vector<std::vector<int32_t>> labels;
};

// Every batch of epoch 0 of `batches`, as pixels or as floats.
Epoch read_epoch(BatchSource& batches, bool pixels, size_t row_values) {
  Epoch e;
  batches.hand_out_pixels(pixels);
  batches.start_epoch(0);
  std::vector<int32_t> labels(static_cast<size_t>(batches.batch()));
  const size_t values = row_values * static_cast<size_t>(batches.batch());
  for (;;) {
    bool more = false;
    if (pixels) {
      more = batches.next_pixels(
          [&](const PixelBatch& p) {
            EXPECT_EQ(p.rows, batches.batch());
            e.pixels.emplace_back(p.pixels, p.pixels + values);
            e.scale_shift.push_back({p.scale[0], p.scale[1], p.scale[2], p.shift[0], p.shift[1], p.shift[2]});
          },
          labels.data());
    } else {
      std::vector<float> f(values);
      more = batches.next(f.data(), labels.data());
      if (more) e.floats.push_back(std::move(f));
    }
    if (!more) return e;
    e.labels.push_back(labels);
  }
}

// Each pixel normalised with its batch's affine is the float batch's value to within half a level
// (rows left out of an evaluation, label -1, are zero either way and not compared).
void expect_within_half_a_level(const Epoch& pixels, const Epoch& floats) {
  ASSERT_EQ(pixels.pixels.size(), floats.floats.size());
  ASSERT_GT(pixels.pixels.size(), 0u);
  EXPECT_EQ(pixels.labels, floats.labels);
  for (size_t b = 0; b < pixels.pixels.size(); ++b) {
    const std::vector<float>& a = pixels.scale_shift[b];
    double worst = 0;
    const size_t row_values = pixels.pixels[b].size() / pixels.labels[b].size();
    for (size_t i = 0; i < pixels.pixels[b].size(); ++i) {
      if (pixels.labels[b][i / row_values] < 0) continue;
      const int c = static_cast<int>(i % 3);
      const float v = static_cast<float>(pixels.pixels[b][i]) * a[c] + a[3 + c];
      worst = std::max(worst, std::abs(double{v} - floats.floats[b][i]) / a[c]);
    }
    EXPECT_LE(worst, 0.5 + 1e-3) << "batch " << b << ": the largest difference in levels of 255";
  }
}

}  // namespace

TEST(ImagePixels, ResamplingToPixelsRoundsTheFloatResampling) {
  RgbImage image{53, 37, {}};  // 53 wide, 37 high
  std::mt19937 rng(4);
  for (int i = 0; i < 53 * 37 * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(rng() % 256));
  for (int k = 0; k < 12; ++k) {
    const int top = static_cast<int>(rng() % 8), left = static_cast<int>(rng() % 10);
    const CropBox box{top, left, 10 + static_cast<int>(rng() % (image.height - top - 9)),
                      10 + static_cast<int>(rng() % (image.width - left - 9))};
    const int side = 8 + static_cast<int>(rng() % 50);  // shrinking and enlarging
    const bool flip = k % 2 == 1;
    std::vector<float> floats(static_cast<size_t>(side) * side * 3);
    std::vector<uint8_t> pixels(floats.size());
    resample_normalised(image, box, side, side, {0, 0, side, side}, flip, kIdentity, floats.data());
    resample_pixels(image, box, side, side, {0, 0, side, side}, flip, pixels.data());
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_LE(std::abs(pixels[i] - floats[i]), 0.5f + 1e-3f) << "case " << k << ", value " << i;
      ASSERT_EQ(pixels[i], static_cast<uint8_t>(std::clamp(std::floor(floats[i] + 0.5f), 0.0f, 255.0f)))
          << "case " << k << ", value " << i;
    }
  }
  std::vector<uint8_t> out(9);
  EXPECT_NE(error_of([&] { resample_pixels(image, {30, 0, 10, 10}, 1, 3, {0, 0, 1, 3}, false, out.data()); })
                .find("cannot resample box"),
            std::string::npos)
      << "a box outside the image is refused as for floats";
}

TEST(ImagePixels, AFoldersPixelBatchesAreItsFloatBatchesToHalfALevel) {
  const fs::path d = fresh_temp_dir("image_pixels");
  write_class_images(d, "train", 3, 6, 40, 30);  // JPEGs and PNGs
  write_class_images(d, "val", 2, 4, 36, 28);
  write_file(d / "val" / "class0" / "broken.jpg", {0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3});
  const size_t row_values = 24 * 24 * 3;
  for (const bool train : {true, false}) {
    const ImageFolderSplit split = scan_image_folder(d.string(), train ? "train" : "val");
    ImageFolderBatches as_floats(split, options(train, 2)), as_pixels(split, options(train, 3)),
        one_worker(split, options(train, 1));
    const Epoch f = read_epoch(as_floats, false, row_values), p = read_epoch(as_pixels, true, row_values);
    SCOPED_TRACE(train ? "training" : "evaluation");
    expect_within_half_a_level(p, f);
    EXPECT_EQ(read_epoch(one_worker, true, row_values).pixels, p.pixels) << "the bytes do not depend on the workers";
    if (!train) {
      EXPECT_EQ(as_pixels.skipped(), 1) << "the broken file is skipped and counted";
      int64_t left_out = 0;
      for (const std::vector<int32_t>& l : p.labels) left_out += std::count(l.begin(), l.end(), -1);
      EXPECT_GE(left_out, 1) << "its row is left out of the scoring";
    }
  }
  fs::remove_all(d);
}

TEST(ImagePixels, ARankGetsItsRowsAsPixels) {
  const fs::path d = fresh_temp_dir("image_pixels_rank");
  write_class_images(d, "train", 2, 6, 32, 32);
  const ImageFolderSplit split = scan_image_folder(d.string(), "train");
  const size_t row_values = 24 * 24 * 3;
  ImageFolderBatches global(split, options(true, 2));
  const Epoch whole = read_epoch(global, true, row_values);
  ShardedBatches rank1(std::make_unique<ImageFolderBatches>(split, options(true, 2)), 1, 2, 24 * 24 * 3);
  ASSERT_TRUE(rank1.can_hand_out_pixels());
  const Epoch share = read_epoch(rank1, true, row_values);
  ASSERT_EQ(share.pixels.size(), whole.pixels.size());
  for (size_t b = 0; b < whole.pixels.size(); ++b) {
    const std::vector<uint8_t> want(whole.pixels[b].begin() + 3 * row_values, whole.pixels[b].end());
    EXPECT_EQ(share.pixels[b], want) << "batch " << b;
  }
  fs::remove_all(d);
}

TEST(ImagePixels, AnEpochsFormsRefuseEachOther) {
  const fs::path d = fresh_temp_dir("image_pixels_forms");
  write_class_images(d, "train", 2, 6, 32, 32);
  ImageFolderBatches batches(scan_image_folder(d.string(), "train"), options(true, 1));
  std::vector<float> f(6 * 24 * 24 * 3);
  std::vector<int32_t> labels(6);
  batches.start_epoch(0);
  EXPECT_NE(error_of([&] { batches.next_pixels([](const PixelBatch&) {}, labels.data()); }).find("hand_out_pixels(true)"),
            std::string::npos);
  batches.hand_out_pixels(true);
  batches.start_epoch(1);
  EXPECT_NE(error_of([&] { batches.next(f.data(), labels.data()); }).find("use next_pixels()"), std::string::npos);
  EXPECT_THROW(batches.next_images([](const trident::ImageBatchRequest&, const trident::HostRowMaker&) {}, labels.data()),
               trident::Error);
  batches.hand_out_images(true);  // the last word wins
  batches.start_epoch(2);
  EXPECT_NE(error_of([&] { batches.next_pixels([](const PixelBatch&) {}, labels.data()); }).find("hand_out_pixels(true)"),
            std::string::npos);
  batches.hand_out_images(false);
  batches.start_epoch(3);
  EXPECT_TRUE(batches.next(f.data(), labels.data())) << "floats again";
  fs::remove_all(d);
}
