// Tests for the IDX reader: well-formed plain and gzip files, and every kind of damaged file.
// Files are written into a fresh temporary directory; each error test checks the message
// names the file, since that is what the user needs to act on.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/data/idx.h"
#include "support/special_files.h"

namespace fs = std::filesystem;
using trident::Error;
using namespace trident::data;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("trident_data_idx_test_" + std::to_string(::getpid()) + "_" +
             std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  put_be32(out, magic);
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good());
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb9");
  ASSERT_NE(gz, nullptr);
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(gz), Z_OK);
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> ramp(size_t n, uint8_t mul = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * mul);
  return v;
}

// Runs fn, expects a trident::Error whose message contains every string in `parts`.
template <typename Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected trident::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

const std::vector<uint8_t> kPixels = ramp(3 * 2 * 4, 7);  // 3 images of 2x4

}  // namespace

TEST(DataIdx, ReadsPlainAndGzipImages) {
  TempDir dir;
  const auto bytes = idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels);
  write_plain(dir.file("plain"), bytes);
  write_gzip(dir.file("packed.gz"), bytes);
  EXPECT_FALSE(is_gzip_file(dir.file("plain")));
  EXPECT_TRUE(is_gzip_file(dir.file("packed.gz")));
  for (const char* name : {"plain", "packed.gz"}) {
    const IdxImages im = read_idx_images(dir.file(name));
    EXPECT_EQ(im.count, 3);
    EXPECT_EQ(im.height, 2);
    EXPECT_EQ(im.width, 4);
    EXPECT_EQ(im.pixels, kPixels);
  }
}

TEST(DataIdx, DetectsGzipByContentNotName) {
  TempDir dir;
  const auto bytes = idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels);
  write_gzip(dir.file("looks-plain.idx"), bytes);
  write_plain(dir.file("looks-packed.gz"), bytes);
  EXPECT_EQ(read_idx_images(dir.file("looks-plain.idx")).pixels, kPixels);
  EXPECT_EQ(read_idx_images(dir.file("looks-packed.gz")).pixels, kPixels);
}

TEST(DataIdx, ReadsLabels) {
  TempDir dir;
  const std::vector<uint8_t> labels = {0, 9, 3, 3, 1};
  write_plain(dir.file("l"), idx_bytes(kIdxLabelsMagic, {5}, labels));
  write_gzip(dir.file("l.gz"), idx_bytes(kIdxLabelsMagic, {5}, labels));
  for (const char* name : {"l", "l.gz"}) {
    const IdxLabels l = read_idx_labels(dir.file(name), 10);
    EXPECT_EQ(l.count, 5);
    EXPECT_EQ(l.labels, labels);
  }
}

TEST(DataIdx, MissingFileOrDirectory) {
  TempDir dir;
  const std::string missing = dir.file("nope-images-idx3-ubyte.gz");
  expect_error([&] { read_idx_images(missing); }, {missing, "not found"});
  expect_error([&] { read_idx_labels(missing, 10); }, {missing, "not found"});
  const std::string d = dir.file("");
  expect_error([&] { read_idx_images(d); }, {d, "directory"});
}

TEST(DataIdx, BadMagic) {
  TempDir dir;
  const auto bytes = idx_bytes(0x12345678, {3, 2, 4}, kPixels);
  write_plain(dir.file("bad"), bytes);
  write_gzip(dir.file("bad.gz"), bytes);
  for (const char* name : {"bad", "bad.gz"})
    expect_error([&] { read_idx_images(dir.file(name)); },
                 {dir.file(name), "magic", "0x12345678", "0x00000803"});
}

TEST(DataIdx, UnsupportedTypeCode) {
  TempDir dir;
  write_plain(dir.file("f32"), idx_bytes(0x00000D03, {3, 2, 4}, kPixels));
  expect_error([&] { read_idx_images(dir.file("f32")); },
               {dir.file("f32"), "0x0D", "float32", "unsupported"});
}

TEST(DataIdx, WrongNumberOfDimensions) {
  TempDir dir;
  // A label file handed to the image reader, and an image file to the label reader.
  write_plain(dir.file("labels"), idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  write_plain(dir.file("images"), idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels));
  expect_error([&] { read_idx_images(dir.file("labels")); },
               {dir.file("labels"), "3 dimensions", "declares 1"});
  expect_error([&] { read_idx_labels(dir.file("images"), 10); },
               {dir.file("images"), "1 dimension", "declares 3"});
}

TEST(DataIdx, TruncatedHeader) {
  TempDir dir;
  write_plain(dir.file("empty"), {});
  write_plain(dir.file("two"), {0, 0});
  auto partial = idx_bytes(kIdxImagesMagic, {3, 2, 4}, {});
  partial.resize(9);
  write_plain(dir.file("partial"), partial);
  write_gzip(dir.file("partial.gz"), partial);
  expect_error([&] { read_idx_images(dir.file("empty")); }, {dir.file("empty"), "truncated"});
  expect_error([&] { read_idx_images(dir.file("two")); }, {dir.file("two"), "truncated"});
  expect_error([&] { read_idx_images(dir.file("partial")); },
               {dir.file("partial"), "truncated header"});
  expect_error([&] { read_idx_images(dir.file("partial.gz")); },
               {dir.file("partial.gz"), "truncated header"});
}

TEST(DataIdx, ZeroAndAbsurdDimensions) {
  TempDir dir;
  write_plain(dir.file("zero"), idx_bytes(kIdxImagesMagic, {3, 0, 4}, {}));
  expect_error([&] { read_idx_images(dir.file("zero")); }, {dir.file("zero"), "zero"});
  write_plain(dir.file("zero-labels"), idx_bytes(kIdxLabelsMagic, {0}, {}));
  expect_error([&] { read_idx_labels(dir.file("zero-labels"), 10); },
               {dir.file("zero-labels"), "zero"});
  write_plain(dir.file("wide"), idx_bytes(kIdxImagesMagic, {1, 2, 100000}, {}));
  expect_error([&] { read_idx_images(dir.file("wide")); }, {dir.file("wide"), "absurd"});
  write_plain(dir.file("many"), idx_bytes(kIdxImagesMagic, {0xFFFFFFFF, 28, 28}, {}));
  expect_error([&] { read_idx_images(dir.file("many")); }, {dir.file("many"), "absurd"});
  // Within each limit, but 2^28 images of 28x28 exceed the payload limit: no allocation happens.
  write_gzip(dir.file("big.gz"), idx_bytes(kIdxImagesMagic, {1u << 28, 28, 28}, {}));
  expect_error([&] { read_idx_images(dir.file("big.gz")); }, {dir.file("big.gz"), "absurd"});
}

TEST(DataIdx, TruncatedData) {
  TempDir dir;
  auto bytes = idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels);
  bytes.resize(bytes.size() - 5);
  write_plain(dir.file("short"), bytes);
  write_gzip(dir.file("short.gz"), bytes);
  expect_error([&] { read_idx_images(dir.file("short")); },
               {dir.file("short"), "truncated", "3 images of 2x4", "19 bytes", "24 expected"});
  expect_error([&] { read_idx_images(dir.file("short.gz")); },
               {dir.file("short.gz"), "truncated", "3 images of 2x4", "19 bytes"});
  // A header claiming all of Fashion-MNIST over a few bytes fails fast.
  write_gzip(dir.file("claim.gz"), idx_bytes(kIdxImagesMagic, {60000, 28, 28}, kPixels));
  expect_error([&] { read_idx_images(dir.file("claim.gz")); },
               {dir.file("claim.gz"), "60000 images of 28x28", "24 bytes of pixel data"});
  write_plain(dir.file("labels"), idx_bytes(kIdxLabelsMagic, {5}, {1, 2}));
  expect_error([&] { read_idx_labels(dir.file("labels"), 10); },
               {dir.file("labels"), "truncated", "5 labels"});
}

TEST(DataIdx, TrailingGarbage) {
  TempDir dir;
  auto bytes = idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels);
  bytes.insert(bytes.end(), {1, 2, 3});
  write_plain(dir.file("long"), bytes);
  write_gzip(dir.file("long.gz"), bytes);
  for (const char* name : {"long", "long.gz"})
    expect_error([&] { read_idx_images(dir.file(name)); },
                 {dir.file(name), "trailing", "3 bytes"});
  write_plain(dir.file("labels"), idx_bytes(kIdxLabelsMagic, {2}, {1, 2, 3}));
  expect_error([&] { read_idx_labels(dir.file("labels"), 10); },
               {dir.file("labels"), "trailing"});
}

TEST(DataIdx, CorruptGzip) {
  TempDir dir;
  const auto payload = ramp(64 * 28 * 28, 13);
  write_gzip(dir.file("ok.gz"), idx_bytes(kIdxImagesMagic, {64, 28, 28}, payload));
  const auto good = read_all(dir.file("ok.gz"));
  ASSERT_GT(good.size(), 40u);

  // A damaged CRC-32 in the trailer: the data decodes but its check fails.
  auto bad_crc = good;
  bad_crc[bad_crc.size() - 6] ^= 0xFF;
  write_plain(dir.file("crc.gz"), bad_crc);
  expect_error([&] { read_idx_images(dir.file("crc.gz")); }, {dir.file("crc.gz"), "corrupt gzip"});

  // Damaged deflate data, whatever zlib makes of it.
  auto bad_body = good;
  for (size_t i = 12; i < bad_body.size() - 8; i += 7) bad_body[i] ^= 0x5A;
  write_plain(dir.file("body.gz"), bad_body);
  expect_error([&] { read_idx_images(dir.file("body.gz")); }, {dir.file("body.gz")});

  // A compressed stream cut in half.
  auto cut = good;
  cut.resize(cut.size() / 2);
  write_plain(dir.file("cut.gz"), cut);
  expect_error([&] { read_idx_images(dir.file("cut.gz")); }, {dir.file("cut.gz"), "gzip"});

  // Just the gzip magic.
  write_plain(dir.file("magic-only.gz"), {0x1f, 0x8b});
  expect_error([&] { read_idx_images(dir.file("magic-only.gz")); }, {dir.file("magic-only.gz")});
}

TEST(DataIdx, LabelOutOfRange) {
  TempDir dir;
  write_gzip(dir.file("l.gz"), idx_bytes(kIdxLabelsMagic, {4}, {0, 1, 7, 2}));
  EXPECT_NO_THROW(read_idx_labels(dir.file("l.gz"), 8));
  expect_error([&] { read_idx_labels(dir.file("l.gz"), 5); },
               {dir.file("l.gz"), "label 7", "index 2", "[0, 5)"});
  expect_error([&] { read_idx_labels(dir.file("l.gz"), 0); }, {dir.file("l.gz"), "classes"});
  expect_error([&] { read_idx_labels(dir.file("l.gz"), 300); }, {dir.file("l.gz"), "classes"});
}

TEST(DataIdx, AFifoIsRefusedWithoutBlocking) {
  const trident::test_support::SpecialFiles f("idx", "pipe-images-idx3-ubyte", "dir-images-idx3-ubyte");
  trident::test_support::expect_special_files_refused([](const std::string& p) { read_idx_images(p); }, f);
  trident::test_support::expect_refused_file([](const std::string& p) { read_idx_labels(p, 10); }, f.fifo, "FIFO");
}

// A small gzip file whose header declares 1.37 M images: with a record limit only the first
// records are read (and only their bytes announced before allocating), whatever the header
// claims and whether or not the rest exists; before, the whole claim was read first.
TEST(DataIdx, ARecordLimitReadsOnlyTheFirstRecords) {
  TempDir dir;
  const std::vector<uint8_t> first = ramp(600 * 28 * 28, 3);
  write_gzip(dir.file("huge.gz"), idx_bytes(kIdxImagesMagic, {1370000, 28, 28}, first));
  int64_t announced = -1;
  const IdxImages im = read_idx_images(dir.file("huge.gz"), {512, [&](int64_t n, int64_t bytes) {
                                                               EXPECT_EQ(n, 512);
                                                               announced = bytes;
                                                             }});
  EXPECT_EQ(announced, 512 * 28 * 28);
  EXPECT_EQ(im.declared_count, 1370000);
  EXPECT_EQ(im.count, 512);
  EXPECT_EQ(im.pixels, std::vector<uint8_t>(first.begin(), first.begin() + 512 * 28 * 28));
  // The records read must be present; all 1.37 M would pass the payload cap.
  expect_error([&] { read_idx_images(dir.file("huge.gz"), {700, {}}); }, {dir.file("huge.gz"), "truncated"});
  expect_error([&] { read_idx_images(dir.file("huge.gz")); }, {dir.file("huge.gz"), "absurd"});
  // A plain file is held to the bytes present for the records read, not for the rest.
  write_plain(dir.file("huge.idx"), idx_bytes(kIdxImagesMagic, {1370000, 2, 4}, kPixels));
  EXPECT_EQ(read_idx_images(dir.file("huge.idx"), {3, {}}).pixels, kPixels);
  expect_error([&] { read_idx_images(dir.file("huge.idx"), {4, {}}); }, {dir.file("huge.idx"), "truncated"});
  // Labels alike, each label checked.
  write_gzip(dir.file("labels.gz"), idx_bytes(kIdxLabelsMagic, {1370000}, {1, 2, 3, 4}));
  const IdxLabels l = read_idx_labels(dir.file("labels.gz"), 10, {2, {}});
  EXPECT_EQ(l.labels, (std::vector<uint8_t>{1, 2}));
}
