// The image transforms of image_transform.h. Resampling is separable: per output column and row
// a short list of source taps with normalised triangle weights, a horizontal pass over only the
// source rows the window needs, then a vertical pass straight into the output: normalised
// floats, or pixels rounded to uint8 for a device that normalises them itself.
#include "runtime/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/data/random.h"

namespace trident::data {

namespace {

// Python's round(): to the nearest integer, halves to even (the default floating-point mode).
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * uniform01(rng); }

// The taps of outputs [first, first + count) of an axis that resamples `in_size` source pixels
// starting at `in_start` to `out_size`: output o reads source pixels [start[o], start[o] + n[o]).
struct AxisTaps {
  std::vector<int> start, n;
  std::vector<float> weight;  // max_taps per output, the first n[o] used
  int max_taps = 0;
};

AxisTaps axis_taps(int in_start, int in_size, int out_size, int first, int count) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double widen = std::max(scale, 1.0);  // the triangle spans `widen` source pixels a side
  AxisTaps t;
  t.max_taps = static_cast<int>(std::ceil(widen)) * 2 + 1;
  t.start.resize(count);
  t.n.resize(count);
  t.weight.assign(static_cast<size_t>(count) * t.max_taps, 0.0f);
  std::vector<double> w(t.max_taps);
  for (int o = 0; o < count; ++o) {
    const double centre = (first + o + 0.5) * scale;  // in box coordinates
    const int lo = std::max(static_cast<int>(std::floor(centre - widen + 0.5)), 0);
    const int hi = std::min(static_cast<int>(std::floor(centre + widen + 0.5)), in_size);
    double sum = 0;
    int n = 0;
    for (int x = lo; x < hi && n < t.max_taps; ++x, ++n) {
      w[n] = std::max(0.0, 1.0 - std::abs((x + 0.5 - centre) / widen));
      sum += w[n];
    }
    t.start[o] = in_start + lo;
    t.n[o] = n;
    for (int k = 0; k < n; ++k) t.weight[static_cast<size_t>(o) * t.max_taps + k] = static_cast<float>(w[k] / sum);
  }
  return t;
}

}  // namespace

void normalisation_affine(const Normalisation& norm, float scale[3], float shift[3]) {
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * norm.std[c]);
    shift[c] = -norm.mean[c] / norm.std[c];
  }
}

CropBox random_resized_crop_box(int height, int width, std::mt19937_64& rng, double scale_min, double scale_max,
                                double ratio_min, double ratio_max) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * uniform(rng, scale_min, scale_max);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(uniform_below(rng, static_cast<uint64_t>(height - h) + 1));
      const int left = static_cast<int>(uniform_below(rng, static_cast<uint64_t>(width - w) + 1));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio_min)
    h = round_half_even(w / ratio_min);
  else if (in_ratio > ratio_max)
    w = round_half_even(h * ratio_max);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

namespace {

// The resampling both outputs share: `store(d, v)` writes output pixel v (three channels, source
// units 0..255) at d, the window's flipped position, as a float or a uint8 output wants it.
template <class T, class Store>
void resample_into(const RgbImage& image, CropBox box, int out_height, int out_width, CropBox window, bool flip,
                   T* out, Store store) {
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 || box.top + box.height > image.height ||
      box.left + box.width > image.width || out_height < 1 || out_width < 1 || window.top < 0 || window.left < 0 ||
      window.height < 1 || window.width < 1 || window.top + window.height > out_height ||
      window.left + window.width > out_width)
    throw Error("cannot resample box " + std::to_string(box.height) + "x" + std::to_string(box.width) + " at (" +
                std::to_string(box.top) + ", " + std::to_string(box.left) + ") of a " + std::to_string(image.height) +
                "x" + std::to_string(image.width) + " image to " + std::to_string(out_height) + "x" +
                std::to_string(out_width) + " and keep a " + std::to_string(window.height) + "x" +
                std::to_string(window.width) + " window of it");
  const AxisTaps rows = axis_taps(box.top, box.height, out_height, window.top, window.height);
  const AxisTaps cols = axis_taps(box.left, box.width, out_width, window.left, window.width);
  const int row_lo = rows.start.front(), row_hi = rows.start.back() + rows.n.back();
  const int W = window.width;

  // Horizontal pass: the source rows the window reads, each resampled to W columns.
  std::vector<float> tmp(static_cast<size_t>(row_hi - row_lo) * W * 3);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = image.pixels.data() + static_cast<size_t>(y) * image.width * 3;
    float* dst = tmp.data() + static_cast<size_t>(y - row_lo) * W * 3;
    for (int o = 0; o < W; ++o) {
      const float* w = cols.weight.data() + static_cast<size_t>(o) * cols.max_taps;
      const uint8_t* s = src + static_cast<size_t>(cols.start[o]) * 3;
      float r = 0, g = 0, b = 0;
      for (int k = 0; k < cols.n[o]; ++k) {
        r += w[k] * s[3 * k];
        g += w[k] * s[3 * k + 1];
        b += w[k] * s[3 * k + 2];
      }
      dst[3 * o] = r;
      dst[3 * o + 1] = g;
      dst[3 * o + 2] = b;
    }
  }

  // Vertical pass and flip, then the output's own store.
  for (int o = 0; o < window.height; ++o) {
    const float* w = rows.weight.data() + static_cast<size_t>(o) * rows.max_taps;
    const float* base = tmp.data() + static_cast<size_t>(rows.start[o] - row_lo) * W * 3;
    T* dst = out + static_cast<size_t>(o) * W * 3;
    for (int x = 0; x < W; ++x) {
      float v[3] = {0, 0, 0};
      for (int k = 0; k < rows.n[o]; ++k) {
        const float* s = base + (static_cast<size_t>(k) * W + x) * 3;
        for (int c = 0; c < 3; ++c) v[c] += w[k] * s[c];
      }
      store(dst + static_cast<size_t>(flip ? W - 1 - x : x) * 3, v);
    }
  }
}

}  // namespace

void resample_normalised(const RgbImage& image, CropBox box, int out_height, int out_width, CropBox window,
                         bool flip, const Normalisation& norm, float* out) {
  // out = x * (1 / (255 std)) - mean / std.
  float mul[3], add[3];
  normalisation_affine(norm, mul, add);
  resample_into(image, box, out_height, out_width, window, flip, out, [&](float* d, const float* v) {
    for (int c = 0; c < 3; ++c) d[c] = v[c] * mul[c] + add[c];
  });
}

void resample_pixels(const RgbImage& image, CropBox box, int out_height, int out_width, CropBox window, bool flip,
                     uint8_t* out) {
  // The taps' weights are positive and sum to one, so v lies in [0, 255] up to rounding.
  resample_into(image, box, out_height, out_width, window, flip, out, [](uint8_t* d, const float* v) {
    for (int c = 0; c < 3; ++c) d[c] = static_cast<uint8_t>(std::clamp(v[c] + 0.5f, 0.0f, 255.0f));
  });
}

uint64_t augmentation_seed(uint64_t seed, int64_t epoch, int64_t index) {
  constexpr uint64_t kAugmentationStream = 0x61756700;  // apart from the shuffles' streams
  return derive_seed(derive_seed(derive_seed(seed, kAugmentationStream), static_cast<uint64_t>(epoch)),
                     static_cast<uint64_t>(index));
}

TrainCrop train_crop(int height, int width, uint64_t sample_seed) {
  std::mt19937_64 rng(sample_seed);
  TrainCrop crop;
  crop.box = random_resized_crop_box(height, width, rng);
  crop.flip = uniform01(rng) < 0.5;
  return crop;
}

void train_transform(const RgbImage& image, int size, uint64_t sample_seed, const Normalisation& norm, float* out) {
  const TrainCrop crop = train_crop(image.height, image.width, sample_seed);
  resample_normalised(image, crop.box, size, size, {0, 0, size, size}, crop.flip, norm, out);
}

void train_transform_region(const RgbRegion& region, TrainCrop crop, int size, const Normalisation& norm, float* out) {
  const CropBox inside{crop.box.top - region.top, crop.box.left - region.left, crop.box.height, crop.box.width};
  resample_normalised(region.image, inside, size, size, {0, 0, size, size}, crop.flip, norm, out);
}

void train_pixels_region(const RgbRegion& region, TrainCrop crop, int size, uint8_t* out) {
  const CropBox inside{crop.box.top - region.top, crop.box.left - region.left, crop.box.height, crop.box.width};
  resample_pixels(region.image, inside, size, size, {0, 0, size, size}, crop.flip, out);
}

int eval_resize_side(int size) { return round_half_even(size / 0.875); }

EvalGeometry eval_geometry(int height, int width, int size) {
  const int side = eval_resize_side(size);
  // The longer side scaled alike, in doubles: a 2^24 x 1 image would make it 2^32, past int.
  const double longer = width <= height ? static_cast<double>(side) * height / width
                                        : static_cast<double>(side) * width / height;
  if (!(longer < kMaxResizedSide))
    throw Error("resizing a " + std::to_string(width) + "x" + std::to_string(height) +
                " image to a shorter side of " + std::to_string(side) + " makes its longer side " +
                std::to_string(static_cast<int64_t>(longer)) + " pixels, past the " + std::to_string(kMaxResizedSide) +
                " evaluation resizes to");
  EvalGeometry g;
  g.resize_height = width <= height ? static_cast<int>(longer) : side;
  g.resize_width = width <= height ? side : static_cast<int>(longer);
  g.window = {round_half_even((g.resize_height - size) / 2.0), round_half_even((g.resize_width - size) / 2.0), size, size};
  return g;
}

void eval_transform(const RgbImage& image, int size, const Normalisation& norm, float* out) {
  const EvalGeometry g = eval_geometry(image.height, image.width, size);
  resample_normalised(image, {0, 0, image.height, image.width}, g.resize_height, g.resize_width, g.window, false, norm,
                      out);
}

void eval_pixels(const RgbImage& image, int size, uint8_t* out) {
  const EvalGeometry g = eval_geometry(image.height, image.width, size);
  resample_pixels(image, {0, 0, image.height, image.width}, g.resize_height, g.resize_width, g.window, false, out);
}

}  // namespace trident::data
