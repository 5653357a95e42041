// CIFAR-10 binary batches (see cifar.h).
#include "runtime/data/cifar.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "core/memory_budget.h"

namespace trident::data {

namespace {

namespace fs = std::filesystem;

constexpr int kSide = 32, kChannels = 3, kClasses = 10;
constexpr int64_t kPixels = kSide * kSide;
constexpr int64_t kRecord = 1 + kChannels * kPixels;  // label byte + three planes

std::vector<std::string> split_files(const std::string& split) {
  if (split == "train")
    return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
  if (split == "test") return {"test_batch.bin"};
  throw Error("CIFAR-10 has splits 'train' and 'test', not '" + split + "'");
}

}  // namespace

bool is_cifar10_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "data_batch_1.bin", ec) ||
         fs::is_regular_file(fs::path(dir) / "test_batch.bin", ec);
}

Dataset load_cifar10(const std::string& dir, const std::string& split, const LoadLimits& limits) {
  const std::vector<std::string> names = split_files(split);
  std::vector<std::unique_ptr<InputFile>> files;
  std::vector<int64_t> records;
  int64_t total = 0;
  for (const std::string& name : names) {
    const std::string path = (fs::path(dir) / name).string();
    files.push_back(std::make_unique<InputFile>(path, "CIFAR-10 batch"));
    const uint64_t size = files.back()->size();
    if (size == 0 || size % kRecord != 0)
      throw Error(path + ": " + std::to_string(size) + " bytes is not a whole number of CIFAR-10 records (" +
                  std::to_string(kRecord) + " bytes each: a label and a 32x32x3 image)");
    records.push_back(static_cast<int64_t>(size / kRecord));
    total += records.back();
  }
  const int64_t count = limits.max_samples > 0 ? std::min(limits.max_samples, total) : total;
  if (limits.budget)
    limits.budget->claim(static_cast<uint64_t>(count) * (kChannels * kPixels * sizeof(float) + sizeof(int32_t)),
                         "the " + std::to_string(count) + " CIFAR-10 " + split + " images", limits.advice);
  Dataset ds;
  ds.count = count;
  ds.height = ds.width = kSide;
  ds.channels = kChannels;
  ds.num_classes = kClasses;
  ds.name = "cifar10/" + split;
  if (limits.max_samples > 0) ds.name = subset_name(ds.name, 0, ds.count);
  ds.images.resize(static_cast<size_t>(count * kChannels * kPixels));
  ds.labels.resize(static_cast<size_t>(count));
  std::vector<unsigned char> record(static_cast<size_t>(kRecord));
  int64_t i = 0;
  for (size_t f = 0; f < files.size() && i < count; ++f)
    for (int64_t r = 0; r < records[f] && i < count; ++r, ++i) {
      files[f]->read_at(static_cast<uint64_t>(r * kRecord), record.size(), record.data());
      if (record[0] >= kClasses)
        throw Error((fs::path(dir) / names[f]).string() + ": record " + std::to_string(r) + " has label " +
                    std::to_string(record[0]) + ", outside 0-9");
      ds.labels[static_cast<size_t>(i)] = record[0];
      float* out = ds.images.data() + i * kChannels * kPixels;
      for (int64_t p = 0; p < kPixels; ++p)
        for (int c = 0; c < kChannels; ++c)
          out[p * kChannels + c] = (record[1 + c * kPixels + p] / 255.0f - kCifar10Mean[c]) / kCifar10Std[c];
    }
  return ds;
}

}  // namespace trident::data
