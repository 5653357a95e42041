// Bounded smoke run of fuzz/fuzz_idx.cpp in the regular suite: 2000 seeded mutations of valid
// IDX image and label files, read plain, gzip-compressed after mutation (header faults seen
// through zlib) and as mutated gzip streams; each must be read or rejected with trident::Error.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "runtime/data/idx.h"
#include "support/gzip_bytes.h"
#include "support/mutate.h"
#include "support/temp_dir.h"

using namespace trident;
using namespace trident::data;

namespace {

std::vector<uint8_t> idx_file(uint32_t magic, const std::vector<uint32_t>& dims, size_t payload, uint8_t mod) {
  std::vector<uint8_t> out;
  auto be32 = [&out](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  for (size_t i = 0; i < payload; ++i) out.push_back(static_cast<uint8_t>(i % mod));
  return out;
}

void write(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

TEST(IdxFuzzSmoke, MutatedFilesAreReadOrRejected) {
  const std::string path = (test_support::fresh_temp_dir("idx_fuzz") / "mutant").string();
  const std::vector<uint8_t> images = idx_file(kIdxImagesMagic, {3, 4, 5}, 60, 251);
  const std::vector<uint8_t> labels = idx_file(kIdxLabelsMagic, {6}, 6, 10);
  std::mt19937_64 rng(20261201);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    const bool want_labels = i % 2;
    std::vector<uint8_t> b = want_labels ? labels : images;
    const int how = (i / 2) % 3;  // plain, gzip after the mutation, mutated gzip stream
    if (how == 2) b = test_support::gzip_bytes(b);
    test_support::mutate(b, rng, /*header=*/16);
    if (how == 1) b = test_support::gzip_bytes(b);
    write(path, b);
    try {
      if (want_labels) {
        const IdxLabels l = read_idx_labels(path, 10);
        ASSERT_EQ(static_cast<int64_t>(l.labels.size()), l.count);
        for (uint8_t v : l.labels) ASSERT_LT(v, 10);
      } else {
        const IdxImages im = read_idx_images(path);
        ASSERT_EQ(static_cast<int64_t>(im.pixels.size()), im.count * im.height * im.width);
      }
      ++accepted;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 20);
}
