// CIFAR-10's binary batches (runtime/data/cifar.h): planar RGB records become normalised NHWC
// floats in file order, the splits read their own files, a sample limit reads only what it
// needs, and a malformed file or label is one sentence naming the file. `--data DIR` tells the
// format by what DIR holds, so resnet_cifar trains on CIFAR-10 through the real binary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/data/cifar.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;

// A record: label, then pixel p of channel c = (seed + 3p + c) % 256, plane by plane.
std::string record(int label, int seed) {
  std::string r(1 + 3 * 1024, '\0');
  r[0] = static_cast<char>(label);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; ++p) r[static_cast<size_t>(1 + c * 1024 + p)] = static_cast<char>((seed + 3 * p + c) % 256);
  return r;
}

void write_batch(const fs::path& p, int records, int first_seed) {
  std::ofstream f(p, std::ios::binary);
  for (int i = 0; i < records; ++i) f << record((first_seed + i) % 10, first_seed + i);
}

// Five training batches of 2 records (seeds 0..9) and a test batch of 3 (seeds 100..102).
fs::path make_cifar(const std::string& name) {
  const fs::path d = test_support::fresh_temp_dir(name);
  for (int b = 1; b <= 5; ++b) write_batch(d / ("data_batch_" + std::to_string(b) + ".bin"), 2, 2 * (b - 1));
  write_batch(d / "test_batch.bin", 3, 100);
  return d;
}

float expected(int seed, int p, int c) {
  return (static_cast<float>((seed + 3 * p + c) % 256) / 255.0f - data::kCifar10Mean[c]) / data::kCifar10Std[c];
}

TEST(Cifar10, RecordsBecomeNormalisedNhwcImagesInFileOrder) {
  const fs::path d = make_cifar("cifar_read");
  ASSERT_TRUE(data::is_cifar10_dir(d.string()));
  const data::Dataset train = data::load_cifar10(d.string(), "train");
  EXPECT_EQ(train.count, 10);
  EXPECT_EQ(train.height, 32);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.name, "cifar10/train");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(train.labels[static_cast<size_t>(i)], i % 10);
    for (int p : {0, 1, 517, 1023})
      for (int c = 0; c < 3; ++c)
        EXPECT_FLOAT_EQ(train.images[static_cast<size_t>((i * 1024 + p) * 3 + c)], expected(i, p, c))
            << "sample " << i << " pixel " << p << " channel " << c;
  }
  const data::Dataset test = data::load_image_dataset(d.string(), "test");  // told apart by its files
  EXPECT_EQ(test.count, 3);
  EXPECT_FLOAT_EQ(test.images[3 * 5 + 2], expected(100, 5, 2));
  const data::Dataset some = data::load_cifar10(d.string(), "train", {3, nullptr, ""});
  EXPECT_EQ(some.count, 3);
  EXPECT_EQ(some.name, "cifar10/train[0:3]");
  EXPECT_EQ(some.labels[2], 2);
  fs::remove_all(d);
}

TEST(Cifar10, AMalformedFileOrLabelIsOneSentenceNamingTheFile) {
  const fs::path d = make_cifar("cifar_bad");
  std::ofstream(d / "data_batch_3.bin", std::ios::app) << "x";  // one byte past a whole record
  try {
    data::load_cifar10(d.string(), "train");
    FAIL() << "read a batch that is not a whole number of records";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data_batch_3.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("whole number of CIFAR-10 records"), std::string::npos) << e.what();
  }
  write_batch(d / "data_batch_3.bin", 2, 4);
  std::ofstream(d / "test_batch.bin", std::ios::binary) << record(10, 0);
  try {
    data::load_cifar10(d.string(), "test");
    FAIL() << "accepted label 10";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test_batch.bin: record 0 has label 10"), std::string::npos) << e.what();
  }
  fs::remove(d / "data_batch_5.bin");
  EXPECT_THROW(data::load_cifar10(d.string(), "train"), Error);
  EXPECT_THROW(data::load_cifar10(d.string(), "valid"), Error);
  fs::remove_all(d);
}

TEST(Cifar10, TrainTakesItThroughData) {
  const fs::path d = make_cifar("cifar_cli");
  const auto r = test_support::run_trident("train --model resnet_cifar --data " + d.string() +
                                           " --batch 2 --epochs 1 --threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"dataset\":\"cifar10/train\""), std::string::npos) << r.output;
  // The default network takes 28x28x1: the message says what the data holds.
  const auto wrong = test_support::run_trident("train --data " + d.string() + " --epochs 1");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_NE(wrong.output.find("holds cifar10/train (32x32x3 images in 10 classes), which does not fit model"), std::string::npos)
      << wrong.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace trident
