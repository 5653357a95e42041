// Dataset loading (IDX pairs, Fashion-MNIST), the synthetic task and subsets (see dataset.h).
// Synthetic samples draw from per-sample generators derived from (seed, index), so the data is
// identical whatever the thread count, and only portable random conversions are used.
#include "runtime/data/dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/memory_budget.h"
#include "runtime/data/cifar.h"
#include "runtime/data/idx.h"
#include "runtime/data/random.h"

namespace trident::data {
namespace {

constexpr const char* kFashionMnistSystemDir = "/usr/share/datasets/fashion-mnist";
// 16 GiB of floats: an ImageNet-sized model's synthetic epoch of 20 000+ images fits; the run's
// memory budget is checked before this (runtime/data/train_data.cpp).
constexpr int64_t kMaxSyntheticFloats = int64_t{1} << 32;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

void validate(const Dataset& ds) {
  const std::string who = "dataset " + quoted(ds.name);
  if (ds.count < 1 || ds.height < 1 || ds.width < 1 || ds.channels < 1 || ds.num_classes < 1)
    throw Error(who + " has an empty or negative shape: " + std::to_string(ds.count) +
                " samples of " + std::to_string(ds.height) + "x" + std::to_string(ds.width) +
                "x" + std::to_string(ds.channels) + " in " + std::to_string(ds.num_classes) +
                " classes");
  if (static_cast<int64_t>(ds.images.size()) != ds.count * ds.sample_size())
    throw Error(who + " holds " + std::to_string(ds.images.size()) + " image floats but " +
                std::to_string(ds.count) + " samples of " + std::to_string(ds.sample_size()) +
                " floats need " + std::to_string(ds.count * ds.sample_size()));
  if (static_cast<int64_t>(ds.labels.size()) != ds.count)
    throw Error(who + " holds " + std::to_string(ds.labels.size()) + " labels for " +
                std::to_string(ds.count) + " samples");
  for (int64_t i = 0; i < ds.count; ++i) {
    const int32_t label = ds.labels[static_cast<size_t>(i)];
    if (label < 0 || label >= ds.num_classes)
      throw Error(who + " has label " + std::to_string(label) + " at index " + std::to_string(i) +
                  ", outside [0, " + std::to_string(ds.num_classes) + ")");
  }
}

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                      int num_classes, float mean, float std, const LoadLimits& limits) {
  if (!std::isfinite(mean) || !std::isfinite(std) || !(std > 0.0f))
    throw Error(images_path + ": cannot normalise with mean " + std::to_string(mean) +
                " and std " + std::to_string(std) + "; the std must be positive and finite");
  // The budget claims what stays (floats, int32 labels) and checks the bytes read meanwhile.
  IdxReadLimits image_limits{limits.max_samples, {}}, label_limits{limits.max_samples, {}};
  if (MemoryBudget* budget = limits.budget) {
    image_limits.before_payload = [budget, &images_path, &limits](int64_t count, int64_t bytes) {
      const std::string what = "the " + std::to_string(count) + " images of " + images_path;
      budget->claim(static_cast<uint64_t>(bytes) * sizeof(float), what, limits.advice);
      budget->check(static_cast<uint64_t>(bytes), "reading " + what, limits.advice);
    };
    label_limits.before_payload = [budget, &labels_path, &limits](int64_t count, int64_t) {
      budget->claim(static_cast<uint64_t>(count) * (sizeof(int32_t) + 1),
                    "the " + std::to_string(count) + " labels of " + labels_path, limits.advice);
    };
  }
  IdxImages images = read_idx_images(images_path, image_limits);
  IdxLabels labels = read_idx_labels(labels_path, num_classes, label_limits);
  if (images.declared_count != labels.declared_count)
    throw Error("image file " + images_path + " holds " + std::to_string(images.declared_count) +
                " images but label file " + labels_path + " holds " +
                std::to_string(labels.declared_count) + " labels; the two must have the same count");

  Dataset ds;
  ds.count = images.count;
  ds.height = images.height;
  ds.width = images.width;
  ds.channels = 1;
  ds.num_classes = num_classes;
  ds.name = std::filesystem::path(images_path).filename().string();

  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = (static_cast<float>(v) / 255.0f - mean) / std;
  const auto n = static_cast<int64_t>(images.pixels.size());
  ds.images.resize(static_cast<size_t>(n));
  const uint8_t* src = images.pixels.data();
  float* dst = ds.images.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
  ds.labels.assign(labels.labels.begin(), labels.labels.end());
  if (limits.max_samples > 0) ds.name = subset_name(ds.name, 0, ds.count);
  return ds;
}

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("TRIDENT_FASHION_MNIST_DIR");
  if (env != nullptr && *env != '\0') return env;
  return kFashionMnistSystemDir;
}

Dataset load_image_dataset(const std::string& dir, const std::string& split, const LoadLimits& limits) {
  if (is_cifar10_dir(dir)) return load_cifar10(dir, split, limits);
  return load_fashion_mnist(dir, split, limits);  // its errors name the IDX files it looked for
}

Dataset load_fashion_mnist(const std::string& dir, const std::string& split, const LoadLimits& limits) {
  namespace fs = std::filesystem;
  if (split != "train" && split != "test")
    throw Error("unknown Fashion-MNIST split " + quoted(split) +
                "; expected \"train\" or \"test\"");
  const std::string hint = std::string("; run scripts/setup.sh, which installs the ") +
                           "dataset-fashion-mnist package into " + kFashionMnistSystemDir +
                           ", or set TRIDENT_FASHION_MNIST_DIR to a directory holding the files";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("Fashion-MNIST directory " + dir +
                (fs::exists(dir, ec) ? " is not a directory" : " does not exist") + hint);
  const std::string prefix = split == "train" ? "train" : "t10k";
  auto pick = [&](const std::string& stem) {
    const fs::path gz = fs::path(dir) / (stem + ".gz");
    const fs::path plain = fs::path(dir) / stem;
    if (fs::exists(gz, ec)) return gz.string();
    if (fs::exists(plain, ec)) return plain.string();
    throw Error(gz.string() + ": file not found (nor its uncompressed form)" + hint);
  };
  const std::string images = pick(prefix + "-images-idx3-ubyte");
  const std::string labels = pick(prefix + "-labels-idx1-ubyte");
  Dataset ds = load_idx_pair(images, labels, 10, kFashionMnistMean, kFashionMnistStd, limits);
  ds.name = "fashion-mnist/" + split;
  if (limits.max_samples > 0) ds.name = subset_name(ds.name, 0, ds.count);
  return ds;
}

Dataset make_synthetic(int64_t count, int height, int width, int channels, int num_classes,
                       uint64_t seed) {
  if (count < 1 || height < 1 || width < 1 || channels < 1)
    throw Error("make_synthetic: count, height, width and channels must be positive, got " +
                std::to_string(count) + " samples of " + std::to_string(height) + "x" +
                std::to_string(width) + "x" + std::to_string(channels));
  if (num_classes < 2 || num_classes > 65536)
    throw Error("make_synthetic: num_classes must be between 2 and 65536, got " +
                std::to_string(num_classes));
  if (height > 4096 || width > 4096 || channels > 4096 ||
      count > kMaxSyntheticFloats / (int64_t{height} * width * channels))
    throw Error("make_synthetic: " + std::to_string(count) + " samples of " +
                std::to_string(height) + "x" + std::to_string(width) + "x" +
                std::to_string(channels) + " exceed the limit of " +
                std::to_string(kMaxSyntheticFloats) + " floats (sides and channels at most 4096)");

  const int64_t sample = int64_t{height} * width * channels;
  if (num_classes > kMaxSyntheticFloats / sample)
    throw Error("make_synthetic: templates for " + std::to_string(num_classes) + " classes of " +
                std::to_string(sample) + " floats exceed the limit of " +
                std::to_string(kMaxSyntheticFloats) + " floats");
  constexpr double kPi = 3.14159265358979323846;

  // Class templates, NHWC like the samples.
  std::mt19937_64 trng(derive_seed(seed, 0));
  std::vector<int> rank(num_classes);
  for (int c = 0; c < num_classes; ++c) rank[c] = c;
  fisher_yates(rank.data(), num_classes, trng);
  std::vector<float> templates(static_cast<size_t>(num_classes * sample));
  const double sigma = std::max(1.0, 0.15 * std::min(height, width));
  for (int c = 0; c < num_classes; ++c) {
    // Brightness offset: classes evenly spaced in [-0.6, 0.6], in a seeded order.
    const double offset = -0.6 + 1.2 * rank[c] / (num_classes - 1);
    // Oriented stripes: direction, spatial frequency (0.1..0.35 cycles/pixel), phase per channel.
    const double angle = kPi * uniform01(trng);
    const double freq = 2.0 * kPi * (0.1 + 0.25 * uniform01(trng));
    const double fx = freq * std::cos(angle), fy = freq * std::sin(angle);
    std::vector<double> phase(channels);
    for (auto& p : phase) p = 2.0 * kPi * uniform01(trng);
    // Two blobs with a random centre and a signed amplitude per channel.
    struct Blob { double y, x; std::vector<double> amp; };
    std::array<Blob, 2> blobs;
    for (auto& b : blobs) {
      b.y = uniform01(trng) * height;
      b.x = uniform01(trng) * width;
      b.amp.resize(channels);
      for (auto& a : b.amp) a = standard_normal(trng);
    }
    float* t = templates.data() + c * sample;
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int ch = 0; ch < channels; ++ch) {
          double v = offset + 0.7 * std::sin(fx * x + fy * y + phase[ch]);
          for (const auto& b : blobs) {
            const double d2 = (y - b.y) * (y - b.y) + (x - b.x) * (x - b.x);
            v += b.amp[ch] * std::exp(-d2 / (2 * sigma * sigma));
          }
          t[(int64_t{y} * width + x) * channels + ch] = static_cast<float>(v);
        }
  }

  Dataset ds;
  ds.count = count;
  ds.height = height;
  ds.width = width;
  ds.channels = channels;
  ds.num_classes = num_classes;
  ds.name = "synthetic";
  // Balanced labels in a seeded random order.
  ds.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) ds.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % num_classes);
  std::mt19937_64 lrng(derive_seed(seed, 1));
  fisher_yates(ds.labels.data(), count, lrng);

  ds.images.resize(static_cast<size_t>(count * sample));
  float* out = ds.images.data();
  const int32_t* labels = ds.labels.data();
  const float* tmpl = templates.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    std::mt19937_64 rng(derive_seed(seed, 2 + static_cast<uint64_t>(i)));
    const float* t = tmpl + labels[i] * sample;
    float* o = out + i * sample;
    for (int64_t k = 0; k < sample; ++k)
      o[k] = t[k] + static_cast<float>(0.5 * standard_normal(rng));
  }
  return ds;
}

std::string subset_name(const std::string& name, int64_t first, int64_t count) {
  return name + "[" + std::to_string(first) + ":" + std::to_string(first + count) + "]";
}

Dataset subset(const Dataset& ds, int64_t first, int64_t count) {
  if (first < 0 || count < 1 || first > ds.count || count > ds.count - first)
    throw Error("cannot take samples [" + std::to_string(first) + ", " +
                std::to_string(first + count) + ") of dataset " + quoted(ds.name) + ", which has " +
                std::to_string(ds.count) + " samples");
  const int64_t sample = ds.sample_size();
  if (static_cast<int64_t>(ds.images.size()) < ds.count * sample ||
      static_cast<int64_t>(ds.labels.size()) < ds.count)
    validate(ds);  // reports the inconsistency
  Dataset out;
  out.count = count;
  out.height = ds.height;
  out.width = ds.width;
  out.channels = ds.channels;
  out.num_classes = ds.num_classes;
  out.name = subset_name(ds.name, first, count);
  out.images.assign(ds.images.begin() + first * sample,
                    ds.images.begin() + (first + count) * sample);
  out.labels.assign(ds.labels.begin() + first, ds.labels.begin() + first + count);
  return out;
}

}  // namespace trident::data
