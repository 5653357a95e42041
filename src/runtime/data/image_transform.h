// From a decoded RGB image to a normalised NHWC float sample, as torchvision's ImageNet recipe
// does: training RandomResizedCrop + horizontal flip, evaluation resize + centre crop, both then
// (x / 255 - mean) / std. Resampling is PIL's bilinear (a triangle filter widened by the scale
// factor when shrinking, so a downscale averages instead of aliasing), clamped to the crop.
#pragma once
#include <cstdint>
#include <random>

#include "runtime/data/image_codec.h"

namespace trident::data {

// Per-channel statistics of x / 255, R, G, B.
struct Normalisation {
  float mean[3];
  float std[3];
};
inline constexpr Normalisation kImageNetNormalisation = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};

// (x / 255 - mean) / std as x · scale + shift, the form every transform applies it in.
void normalisation_affine(const Normalisation& norm, float scale[3], float shift[3]);

// torchvision's RandomResizedCrop.get_params: up to ten draws of an area fraction in
// [scale_min, scale_max] and a log-uniform aspect ratio in [ratio_min, ratio_max] until the box
// fits, else the centre crop of the whole image clamped to that ratio range. Python's rounding
// (half to even) throughout, so the boxes are those torchvision would pick for the same draws.
CropBox random_resized_crop_box(int height, int width, std::mt19937_64& rng, double scale_min = 0.08,
                                double scale_max = 1.0, double ratio_min = 3.0 / 4.0, double ratio_max = 4.0 / 3.0);

// Resamples `box` of `image` to out_height x out_width and writes the part of that result inside
// `window` (in output coordinates) as window.height * window.width * 3 floats, NHWC, mirrored
// left-right with `flip`, each value (x / 255 - mean) / std.
void resample_normalised(const RgbImage& image, CropBox box, int out_height, int out_width, CropBox window,
                         bool flip, const Normalisation& norm, float* out);
// The same resampling with the normalisation left to a device (backends/input_lane.h's
// send_pixels): each value x rounded to the nearest uint8, a quarter of the floats' bytes. x ·
// scale + shift of normalisation_affine() is then resample_normalised's output to within half a
// level (0.5 · scale).
void resample_pixels(const RgbImage& image, CropBox box, int out_height, int out_width, CropBox window, bool flip,
                     uint8_t* out);

// The seed of sample `index`'s augmentation in `epoch`: nothing else (thread, order of work)
// decides what the sample looks like.
uint64_t augmentation_seed(uint64_t seed, int64_t epoch, int64_t index);

// Training: RandomResizedCrop(size, scale (0.08, 1), ratio (3/4, 4/3)), then a flip with
// probability 1/2, drawn in that order from a generator seeded with `sample_seed`.
void train_transform(const RgbImage& image, int size, uint64_t sample_seed, const Normalisation& norm, float* out);

// The two draws of train_transform for an image of height x width, so that a loader can decode
// only the crop (decode_image_region) before it resamples it.
struct TrainCrop {
  CropBox box;
  bool flip = false;
};
TrainCrop train_crop(int height, int width, uint64_t sample_seed);
// train_transform of a region decoded for crop.box: the same floats as train_transform of the
// whole image (the resampling reads only pixels inside the box).
void train_transform_region(const RgbRegion& region, TrainCrop crop, int size, const Normalisation& norm, float* out);
// train_transform_region as uint8 pixels (resample_pixels).
void train_pixels_region(const RgbRegion& region, TrainCrop crop, int size, uint8_t* out);

// The shorter side evaluation resizes to: round(size / 0.875) (256 for 224).
int eval_resize_side(int size);

// Evaluation refuses (an Error) an image whose longer side would pass this after the resize:
// only a freak aspect ratio (a 2^24 x 1 image) gets there.
inline constexpr int kMaxResizedSide = 1 << 24;

// Evaluation's geometry for an image of height x width: the size the whole image is resized to
// and the centre window of it kept (size x size). An Error past kMaxResizedSide.
struct EvalGeometry {
  int resize_height = 0, resize_width = 0;
  CropBox window;
};
EvalGeometry eval_geometry(int height, int width, int size);

// Evaluation: Resize(eval_resize_side(size)) (the longer side scaled alike, rounded down, as
// torchvision does), then CenterCrop(size).
void eval_transform(const RgbImage& image, int size, const Normalisation& norm, float* out);
// eval_transform as uint8 pixels (resample_pixels).
void eval_pixels(const RgbImage& image, int size, uint8_t* out);

}  // namespace trident::data
