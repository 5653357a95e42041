// CIFAR-10 in its binary distribution (cifar-10-batches-bin: data_batch_1.bin … data_batch_5.bin
// for training, test_batch.bin for testing). Each record is one label byte and a 32×32 RGB image
// stored plane by plane (1024 R, 1024 G, 1024 B bytes); it becomes an NHWC float image
// normalised per channel with the training set's statistics.
#pragma once
#include <string>

#include "runtime/data/dataset.h"

namespace trident::data {

// The training set's per-channel pixel statistics (of x / 255), R, G, B.
inline constexpr float kCifar10Mean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifar10Std[3] = {0.2470f, 0.2435f, 0.2616f};

// True when `dir` holds CIFAR-10's binary files (data_batch_1.bin or test_batch.bin).
bool is_cifar10_dir(const std::string& dir);

// Loads split "train" (data_batch_1.bin … data_batch_5.bin, in order) or "test"
// (test_batch.bin) from `dir`. A file whose size is not a whole number of records, or a label
// outside 0–9, is an Error naming the file; a sample limit reads only the records it needs.
Dataset load_cifar10(const std::string& dir, const std::string& split, const LoadLimits& limits = {});

}  // namespace trident::data
