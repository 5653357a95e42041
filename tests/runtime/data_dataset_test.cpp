// Tests for Dataset loading: IDX pairs, Fashion-MNIST (the real files when installed, else a
// small fake directory), the synthetic task's determinism and learnability, and subsets.
// Temporary files live in a fresh directory per test.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_budget.h"
#include "runtime/data/dataset.h"
#include "runtime/data/idx.h"

namespace fs = std::filesystem;
using trident::Error;
using namespace trident::data;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("trident_data_dataset_test_" + std::to_string(::getpid()) + "_" +
             std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  auto be32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile gz = gzopen(path.c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
  } else {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good());
  }
}

// Writes n images of h x w (pixel = (i * 31 + k) % 256) and labels i % 10.
void write_pair(const std::string& images, const std::string& labels, uint32_t n, uint32_t h,
                uint32_t w, bool gzip, uint32_t label_count = 0) {
  std::vector<uint8_t> px(size_t{n} * h * w);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < size_t{h} * w; ++k) px[i * h * w + k] = static_cast<uint8_t>((i * 31 + k) % 256);
  if (label_count == 0) label_count = n;
  std::vector<uint8_t> lb(label_count);
  for (size_t i = 0; i < label_count; ++i) lb[i] = static_cast<uint8_t>(i % 10);
  write_file(images, idx_bytes(kIdxImagesMagic, {n, h, w}, px), gzip);
  write_file(labels, idx_bytes(kIdxLabelsMagic, {label_count}, lb), gzip);
}

template <typename Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected trident::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

TEST(DataDataset, LoadIdxPairNormalises) {
  TempDir dir;
  write_pair(dir.file("im.gz"), dir.file("lb.gz"), 12, 3, 5, true);
  const Dataset ds = load_idx_pair(dir.file("im.gz"), dir.file("lb.gz"), 10, 0.5f, 0.25f);
  EXPECT_EQ(ds.count, 12);
  EXPECT_EQ(ds.height, 3);
  EXPECT_EQ(ds.width, 5);
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.sample_size(), 15);
  ASSERT_EQ(ds.images.size(), 12u * 15u);
  ASSERT_EQ(ds.labels.size(), 12u);
  EXPECT_EQ(ds.name, "im.gz");
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(ds.labels[i], i % 10);
    for (int64_t k = 0; k < 15; ++k) {
      const float x = static_cast<float>((i * 31 + k) % 256) / 255.0f;
      EXPECT_NEAR(ds.images[i * 15 + k], (x - 0.5f) / 0.25f, 1e-5f);
    }
  }
  EXPECT_NO_THROW(validate(ds));
}

TEST(DataDataset, LoadIdxPairErrors) {
  TempDir dir;
  write_pair(dir.file("im"), dir.file("lb"), 12, 3, 5, false, /*label_count=*/11);
  expect_error([&] { load_idx_pair(dir.file("im"), dir.file("lb"), 10, 0.f, 1.f); },
               {dir.file("im"), dir.file("lb"), "12 images", "11 labels"});
  write_pair(dir.file("im2"), dir.file("lb2"), 12, 3, 5, false);
  expect_error([&] { load_idx_pair(dir.file("im2"), dir.file("lb2"), 5, 0.f, 1.f); },
               {dir.file("lb2"), "label 5", "index 5"});
  expect_error([&] { load_idx_pair(dir.file("im2"), dir.file("lb2"), 10, 0.f, 0.f); },
               {dir.file("im2"), "std"});
  expect_error([&] { load_idx_pair(dir.file("missing"), dir.file("lb2"), 10, 0.f, 1.f); },
               {dir.file("missing"), "not found"});
}

TEST(DataDataset, FashionMnistFromDirectory) {
  TempDir dir;
  write_pair(dir.file("train-images-idx3-ubyte.gz"), dir.file("train-labels-idx1-ubyte.gz"), 20,
             28, 28, true);
  // The test split in uncompressed form is accepted too.
  write_pair(dir.file("t10k-images-idx3-ubyte"), dir.file("t10k-labels-idx1-ubyte"), 7, 28, 28,
             false);
  const Dataset train = load_fashion_mnist(dir.path(), "train");
  EXPECT_EQ(train.count, 20);
  EXPECT_EQ(train.name, "fashion-mnist/train");
  EXPECT_NEAR(train.images[0], (0.0f - kFashionMnistMean) / kFashionMnistStd, 1e-5f);
  const Dataset test = load_fashion_mnist(dir.path(), "test");
  EXPECT_EQ(test.count, 7);
  EXPECT_EQ(test.name, "fashion-mnist/test");
  expect_error([&] { load_fashion_mnist(dir.path(), "valid"); }, {"'valid'", "train", "test"});
}

TEST(DataDataset, FashionMnistMissing) {
  TempDir dir;
  const std::string missing = dir.file("no-such-dir");
  expect_error([&] { load_fashion_mnist(missing, "train"); },
               {missing, "does not exist", "scripts/setup.sh", "dataset-fashion-mnist"});
  // The directory exists but the files do not.
  expect_error([&] { load_fashion_mnist(dir.path(), "test"); },
               {dir.file("t10k-images-idx3-ubyte.gz"), "not found", "scripts/setup.sh"});
}

TEST(DataDataset, DefaultDirectoryHonoursEnvironment) {
  const char* old = std::getenv("TRIDENT_FASHION_MNIST_DIR");
  const std::string saved = old != nullptr ? old : "";
  ::unsetenv("TRIDENT_FASHION_MNIST_DIR");
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  ::setenv("TRIDENT_FASHION_MNIST_DIR", "", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  ::setenv("TRIDENT_FASHION_MNIST_DIR", "/somewhere/else", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/somewhere/else");
  if (old != nullptr)
    ::setenv("TRIDENT_FASHION_MNIST_DIR", saved.c_str(), 1);
  else
    ::unsetenv("TRIDENT_FASHION_MNIST_DIR");
}

TEST(DataDataset, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dir))
    GTEST_SKIP() << dir << " is absent; scripts/setup.sh installs the dataset-fashion-mnist package";
  for (const std::string split : {"test", "train"}) {
    const Dataset ds = load_fashion_mnist(dir, split);
    const int64_t expected = split == "test" ? 10000 : 60000;
    EXPECT_EQ(ds.count, expected);
    EXPECT_EQ(ds.height, 28);
    EXPECT_EQ(ds.width, 28);
    EXPECT_EQ(ds.channels, 1);
    EXPECT_EQ(ds.num_classes, 10);
    std::vector<int64_t> hist(10, 0);
    for (int32_t l : ds.labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 10);
      ++hist[l];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(hist[c], expected / 10) << "class " << c;
    double sum = 0, sq = 0;
    for (float v : ds.images) {
      sum += v;
      sq += double{v} * v;
    }
    const double mean = sum / ds.images.size();
    const double sd = std::sqrt(sq / ds.images.size() - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.02) << split;
    EXPECT_NEAR(sd, 1.0, 0.02) << split;
  }
}

TEST(DataDataset, SyntheticIsDeterministic) {
  const Dataset a = make_synthetic(200, 8, 6, 3, 4, 7);
  const Dataset b = make_synthetic(200, 8, 6, 3, 4, 7);
  const Dataset c = make_synthetic(200, 8, 6, 3, 4, 8);
  EXPECT_EQ(a.count, 200);
  EXPECT_EQ(a.height, 8);
  EXPECT_EQ(a.width, 6);
  EXPECT_EQ(a.channels, 3);
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_NO_THROW(validate(a));
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  std::vector<int> hist(4, 0);
  for (int32_t l : a.labels) ++hist[l];
  for (int h : hist) EXPECT_EQ(h, 50);  // balanced
  for (float v : a.images) ASSERT_TRUE(std::isfinite(v));
  // Labels are not in class order.
  bool sorted = true;
  for (int64_t i = 1; i < a.count; ++i) sorted &= a.labels[i] == (a.labels[i - 1] + 1) % 4;
  EXPECT_FALSE(sorted);
}

TEST(DataDataset, SyntheticIsLearnable) {
  // Softmax regression on raw pixels, a much weaker model than a CNN, must fit quickly.
  const int classes = 10;
  // One seed fixes the class templates; the held-out samples are other draws around them.
  const Dataset all = make_synthetic(1500, 12, 12, 1, classes, 3);
  const Dataset train = subset(all, 0, 1000);
  const Dataset held = subset(all, 1000, 500);
  const int64_t d = train.sample_size();
  std::vector<double> w(classes * d, 0.0), b(classes, 0.0);
  auto logits = [&](const Dataset& ds, int64_t i, std::vector<double>& z) {
    for (int c = 0; c < classes; ++c) {
      double s = b[c];
      for (int64_t k = 0; k < d; ++k) s += w[c * d + k] * ds.images[i * d + k];
      z[c] = s;
    }
  };
  auto mean_loss = [&](const Dataset& ds, double* acc) {
    std::vector<double> z(classes);
    double loss = 0;
    int64_t right = 0;
    for (int64_t i = 0; i < ds.count; ++i) {
      logits(ds, i, z);
      double mx = z[0];
      int arg = 0;
      for (int c = 1; c < classes; ++c)
        if (z[c] > mx) mx = z[c], arg = c;
      double se = 0;
      for (double v : z) se += std::exp(v - mx);
      loss += std::log(se) + mx - z[ds.labels[i]];
      right += arg == ds.labels[i];
    }
    if (acc != nullptr) *acc = double(right) / ds.count;
    return loss / ds.count;
  };
  const double initial = mean_loss(train, nullptr);
  EXPECT_NEAR(initial, std::log(10.0), 1e-6);
  std::vector<double> z(classes);
  const double lr = 0.01;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int64_t i = 0; i < train.count; ++i) {
      logits(train, i, z);
      double mx = z[0];
      for (double v : z) mx = std::max(mx, v);
      double se = 0;
      for (double& v : z) se += (v = std::exp(v - mx));
      for (int c = 0; c < classes; ++c) {
        const double g = z[c] / se - (c == train.labels[i] ? 1.0 : 0.0);
        b[c] -= lr * g;
        for (int64_t k = 0; k < d; ++k) w[c * d + k] -= lr * g * train.images[i * d + k];
      }
    }
  double acc = 0;
  const double after = mean_loss(held, &acc);
  EXPECT_LT(after, 0.3) << "loss did not fall from " << initial;
  EXPECT_GT(acc, 0.95);
}

TEST(DataDataset, SyntheticRejectsBadArguments) {
  expect_error([] { make_synthetic(0, 8, 8, 1, 10, 1); }, {"make_synthetic", "positive"});
  expect_error([] { make_synthetic(10, 8, 8, 1, 1, 1); }, {"make_synthetic", "num_classes"});
  expect_error([] { make_synthetic(int64_t{1} << 40, 28, 28, 1, 10, 1); },
               {"make_synthetic", "limit"});
}

TEST(DataDataset, Subset) {
  const Dataset ds = make_synthetic(50, 4, 4, 2, 5, 11);
  const Dataset s = subset(ds, 10, 15);
  EXPECT_EQ(s.count, 15);
  EXPECT_EQ(s.sample_size(), ds.sample_size());
  EXPECT_EQ(s.num_classes, 5);
  EXPECT_NO_THROW(validate(s));
  for (int64_t i = 0; i < 15; ++i) {
    EXPECT_EQ(s.labels[i], ds.labels[10 + i]);
    for (int64_t k = 0; k < ds.sample_size(); ++k)
      ASSERT_EQ(s.images[i * 32 + k], ds.images[(10 + i) * 32 + k]);
  }
  EXPECT_EQ(subset(ds, 0, 50).images, ds.images);
  expect_error([&] { subset(ds, 40, 11); }, {"[40, 51)", "50 samples", "synthetic"});
  expect_error([&] { subset(ds, -1, 5); }, {"synthetic"});
  expect_error([&] { subset(ds, 0, 0); }, {"synthetic"});
}

TEST(DataDataset, ValidateCatchesInconsistency) {
  Dataset ds = make_synthetic(10, 4, 4, 1, 3, 1);
  ds.labels[4] = 3;
  expect_error([&] { validate(ds); }, {"'synthetic'", "label 3", "index 4"});
  ds.labels[4] = 0;
  ds.images.pop_back();
  expect_error([&] { validate(ds); }, {"'synthetic'", "image floats"});
}

// --train-limit while reading, and the memory budget before allocating: a gzip pair declaring
// 1.37 M images took 5.4 GB even with --train-limit 512.
TEST(DataDataset, LimitsApplyWhileReadingAndClaimTheirMemory) {
  TempDir dir;
  write_pair(dir.file("im.gz"), dir.file("lb.gz"), 40, 3, 5, true);
  const Dataset ds = load_idx_pair(dir.file("im.gz"), dir.file("lb.gz"), 10, 0.f, 1.f, {16, nullptr, ""});
  EXPECT_EQ(ds.count, 16);
  EXPECT_EQ(ds.images.size(), 16u * 15u);
  EXPECT_EQ(ds.name, "im.gz[0:16]");
  EXPECT_NO_THROW(validate(ds));

  write_file(dir.file("claims.gz"), idx_bytes(kIdxImagesMagic, {1000000, 28, 28}, std::vector<uint8_t>(784)), true);
  write_file(dir.file("claims-labels.gz"), idx_bytes(kIdxLabelsMagic, {1000000}, {1}), true);
  trident::MemoryBudget budget(uint64_t{256} << 20, "that --max-memory 256M allows", "lower --batch");
  expect_error([&] { load_idx_pair(dir.file("claims.gz"), dir.file("claims-labels.gz"), 10, 0.f, 1.f,
                                   {0, &budget, "use --train-limit"}); },
               {"the 1000000 images of " + dir.file("claims.gz"), "2.9 GiB", "256.0 MiB", "use --train-limit"});
  EXPECT_EQ(budget.claimed(), 0u);
  const Dataset one = load_idx_pair(dir.file("claims.gz"), dir.file("claims-labels.gz"), 10, 0.f, 1.f,
                                    {1, &budget, "use --train-limit"});
  EXPECT_EQ(one.count, 1);
  EXPECT_EQ(budget.claimed(), 784u * 4 + 5);
}
