// The image transforms against pixels worked out by hand: bilinear up- and downscaling (the
// triangle widened when shrinking), normalisation, evaluation's resize + centre crop with
// Python's rounding, and RandomResizedCrop's boxes, fallback and reproducibility.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/data/image_transform.h"

using namespace trident::data;

namespace {

// Mean 0 and std 1/255 leave the resampled values themselves: out = x.
constexpr Normalisation kIdentity = {{0, 0, 0}, {1.0f / 255, 1.0f / 255, 1.0f / 255}};

RgbImage grey_row(const std::vector<uint8_t>& values) {
  RgbImage img{static_cast<int>(values.size()), 1, {}};
  for (uint8_t v : values) img.pixels.insert(img.pixels.end(), {v, v, v});
  return img;
}

std::vector<float> first_channel(const std::vector<float>& hwc) {
  std::vector<float> out;
  for (size_t i = 0; i < hwc.size(); i += 3) out.push_back(hwc[i]);
  return out;
}

}  // namespace

TEST(ImageTransform, UpscalingIsBilinearWithHalfPixelCentres) {
  const RgbImage img = grey_row({0, 100});
  std::vector<float> out(4 * 3);
  resample_normalised(img, {0, 0, 1, 2}, 1, 4, {0, 0, 1, 4}, false, kIdentity, out.data());
  const std::vector<float> want = {0, 25, 75, 100};
  const std::vector<float> got = first_channel(out);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
}

TEST(ImageTransform, DownscalingAveragesOverTheWidenedTriangle) {
  // Halving: output 0 is centred at 1.0, reading 0, 1, 2 with weights 3/4, 3/4, 1/4 (over 7/4):
  // (0·3 + 70·3 + 140) / 7 = 50; output 1 at 3.0 reads 1, 2, 3: (70 + 140·3 + 210·3) / 7 = 160.
  const RgbImage img = grey_row({0, 70, 140, 210});
  std::vector<float> out(2 * 3);
  resample_normalised(img, {0, 0, 1, 4}, 1, 2, {0, 0, 1, 2}, false, kIdentity, out.data());
  EXPECT_NEAR(out[0], 50, 1e-4);
  EXPECT_NEAR(out[3], 160, 1e-4);
  // The same with flip mirrors the row.
  resample_normalised(img, {0, 0, 1, 4}, 1, 2, {0, 0, 1, 2}, true, kIdentity, out.data());
  EXPECT_NEAR(out[0], 160, 1e-4);
  EXPECT_NEAR(out[3], 50, 1e-4);
}

TEST(ImageTransform, CropBoxIsResampledAloneWithItsEdgesClamped) {
  // Box [1, 3) of the row, kept at its size: exactly pixels 1 and 2, nothing from outside it.
  const RgbImage img = grey_row({9, 50, 60, 250});
  std::vector<float> out(2 * 3);
  resample_normalised(img, {0, 1, 1, 2}, 1, 2, {0, 0, 1, 2}, false, kIdentity, out.data());
  EXPECT_FLOAT_EQ(out[0], 50);
  EXPECT_FLOAT_EQ(out[3], 60);
}

TEST(ImageTransform, NormalisesPerChannelWithImageNetStatistics) {
  RgbImage img{1, 1, {255, 0, 128}};
  std::vector<float> out(3);
  resample_normalised(img, {0, 0, 1, 1}, 1, 1, {0, 0, 1, 1}, false, kImageNetNormalisation, out.data());
  EXPECT_NEAR(out[0], (1.0 - 0.485) / 0.229, 1e-5);
  EXPECT_NEAR(out[1], (0.0 - 0.456) / 0.224, 1e-5);
  EXPECT_NEAR(out[2], (128 / 255.0 - 0.406) / 0.225, 1e-5);
}

TEST(ImageTransform, EvalResizesTheShorterSideThenCropsTheCentre) {
  EXPECT_EQ(eval_resize_side(224), 256);
  EXPECT_EQ(eval_resize_side(32), 37);
  // size 7: the shorter side goes to round(8) = 8, so a 16x8 image keeps its size; the centre
  // crop starts at round(0.5) = 0 (half to even) down and round(4.5) = 4 across.
  RgbImage img{16, 8, {}};
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 16; ++x) img.pixels.insert(img.pixels.end(), {uint8_t(16 * y + x), uint8_t(x), uint8_t(y)});
  std::vector<float> out(7 * 7 * 3);
  eval_transform(img, 7, kImageNetNormalisation, out.data());
  const Normalisation& n = kImageNetNormalisation;
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 7; ++x) {
      const uint8_t* src = img.pixels.data() + (y * 16 + x + 4) * 3;
      for (int c = 0; c < 3; ++c)
        EXPECT_NEAR(out[(y * 7 + x) * 3 + c], (src[c] / 255.0 - n.mean[c]) / n.std[c], 1e-5) << y << "," << x << "," << c;
    }
}

TEST(ImageTransform, RandomResizedCropBoxesFitAndRepeat) {
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 200; ++i) {
    const CropBox box = random_resized_crop_box(375, 500, a);
    EXPECT_EQ(box, random_resized_crop_box(375, 500, b));
    EXPECT_GE(box.top, 0);
    EXPECT_GE(box.left, 0);
    EXPECT_LE(box.top + box.height, 375);
    EXPECT_LE(box.left + box.width, 500);
    const double fraction = double(box.height) * box.width / (375.0 * 500.0);
    const double ratio = double(box.width) / box.height;
    // Rounding to whole pixels moves the area and the ratio a little past the drawn ranges.
    EXPECT_GE(fraction, 0.07);
    EXPECT_LE(fraction, 1.0);
    EXPECT_GE(ratio, 0.74);
    EXPECT_LE(ratio, 1.35);
  }
}

TEST(ImageTransform, RandomResizedCropFallsBackToTheClampedCentre) {
  // No box of at least 8 % of a 1000x1 strip fits inside it, so all ten draws fail: the
  // fallback keeps the height and clamps the width to 4/3 of it, round(1.33) = 1, centred.
  std::mt19937_64 rng(1);
  EXPECT_EQ(random_resized_crop_box(1, 1000, rng), (CropBox{0, 499, 1, 1}));
  // A 2-wide column: the width stays, the height becomes round(2 / (3/4)) = 3, centred at 997 / 2.
  EXPECT_EQ(random_resized_crop_box(1000, 2, rng), (CropBox{498, 0, 3, 2}));
}

TEST(ImageTransform, TrainTransformDependsOnlyOnTheSampleSeed) {
  RgbImage img{40, 30, {}};
  for (int i = 0; i < 40 * 30 * 3; ++i) img.pixels.push_back(static_cast<uint8_t>((i * 37) % 251));
  std::vector<float> x(16 * 16 * 3), y(x.size()), z(x.size());
  train_transform(img, 16, augmentation_seed(5, 2, 11), kImageNetNormalisation, x.data());
  train_transform(img, 16, augmentation_seed(5, 2, 11), kImageNetNormalisation, y.data());
  train_transform(img, 16, augmentation_seed(5, 3, 11), kImageNetNormalisation, z.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  EXPECT_NE(augmentation_seed(5, 2, 11), augmentation_seed(5, 2, 12));
  EXPECT_NE(augmentation_seed(5, 2, 11), augmentation_seed(6, 2, 11));
}
