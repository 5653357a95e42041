// In-memory image classification datasets: Fashion-MNIST / IDX pairs, CIFAR-10 (data/cifar.h)
// and a synthetic task.
// Everything is decoded once into one contiguous NHWC float array with int32 labels, so batches
// are plain row copies straight into an executable's input buffers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trident {
class MemoryBudget;
}

namespace trident::data {

struct Dataset {
  int64_t count = 0;
  int height = 0, width = 0, channels = 0;
  int num_classes = 0;
  std::vector<float> images;    // NHWC, normalised; count * height * width * channels floats
  std::vector<int32_t> labels;  // count labels, each in [0, num_classes)
  std::string name;

  // Floats per sample: height * width * channels.
  int64_t sample_size() const { return int64_t{height} * width * channels; }
};

// Fashion-MNIST pixel statistics (of x / 255 over the training set).
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// How much of a dataset to load: at most `max_samples` (0: all; only those are read, so a
// header's claim never sizes more), with the images' and labels' memory claimed from `budget`
// (when set) before it is allocated, a refusal suggesting `advice` (e.g. "use --train-limit").
struct LoadLimits {
  int64_t max_samples = 0;
  MemoryBudget* budget = nullptr;
  std::string advice;
};

// Reads an IDX image file and an IDX label file of the same length; pixels become
// (x / 255 - mean) / std. Throws trident::Error naming both files when the counts differ, and
// the file at fault for anything read_idx_images / read_idx_labels rejects. With a sample
// limit the name gets subset()'s suffix, "[0:N]".
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                      int num_classes, float mean, float std, const LoadLimits& limits = {});

// $TRIDENT_FASHION_MNIST_DIR when set and non-empty, else /usr/share/datasets/fashion-mnist
// (where the Debian package dataset-fashion-mnist installs the files).
std::string default_fashion_mnist_dir();

// Loads split "train" (train-images-idx3-ubyte.gz, 60000 samples) or "test"
// (t10k-images-idx3-ubyte.gz, 10000) from dir; the uncompressed names are accepted too.
// 28x28x1, 10 classes, normalised with kFashionMnistMean / kFashionMnistStd.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split, const LoadLimits& limits = {});

// The dataset in `dir`, by what it holds: CIFAR-10's binary batches (data/cifar.h) or an IDX
// pair in Fashion-MNIST's names. Neither: an Error naming the files looked for.
Dataset load_image_dataset(const std::string& dir, const std::string& split, const LoadLimits& limits = {});

// A learnable synthetic task, deterministic for a seed: each class has a fixed template (a
// class-specific brightness offset, an oriented stripe texture and a few blobs); a sample is
// its class's template plus Gaussian noise. Labels are balanced and in random order.
Dataset make_synthetic(int64_t count, int height, int width, int channels, int num_classes,
                       uint64_t seed);

// The name of samples [first, first + count) of a dataset called `name`: "name[first:end]".
std::string subset_name(const std::string& name, int64_t first, int64_t count);

// Copies samples [first, first + count) into a new dataset (count >= 1).
Dataset subset(const Dataset& ds, int64_t first, int64_t count);

// Throws trident::Error when the fields disagree (sizes, dims, label range).
void validate(const Dataset& ds);

}  // namespace trident::data
