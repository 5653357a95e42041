// Image files as a hostile folder holds them, each read as every outside file is: a FIFO or a
// device named x.png, a link to /dev/zero, a sparse file of gigabytes, a progressive JPEG of
// endless scans, a JPEG cut short whose header promises millions of pixels, a valid PNG whose evaluation resize would overflow, an image whose decode needs
// more than a worker's share, links that loop a class folder back on itself, folders nested past
// any sense. Each is one sentence and a skipped, counted image (or a listing that ends), never a
// hang, a crash or unbounded memory.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "runtime/data/image_codec.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"
#include "runtime/data/image_transform.h"
#include "support/error_of.h"
#include "support/image_folder.h"
#include "support/temp_dir.h"

using namespace trident::data;
using trident::test_support::error_of;
using trident::test_support::fresh_temp_dir;
using trident::test_support::write_file;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> pixels(int w, int h) { return trident::test_support::class_pixels(w, h, 1, 2); }

// A progressive JPEG whose last scan (an AC refinement) is repeated `copies` more times before EOI:
// libjpeg warns of the bogus progression and goes on decoding every copy.
std::vector<uint8_t> many_scans(int copies) {
  const std::vector<uint8_t> px = pixels(16, 16);
  std::vector<uint8_t> jpeg = encode_jpeg(px.data(), 16, 16, 3, 90, true);
  size_t last_sos = 0;
  for (size_t i = 0; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) last_sos = i;
  const std::vector<uint8_t> scan(jpeg.begin() + static_cast<long>(last_sos), jpeg.end() - 2);  // up to EOI
  std::vector<uint8_t> out(jpeg.begin(), jpeg.end() - 2);
  for (int k = 0; k < copies; ++k) out.insert(out.end(), scan.begin(), scan.end());
  out.push_back(0xFF);
  out.push_back(0xD9);
  return out;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(HostileImages, FifosDevicesAndDirectoriesAreRefusedWithoutBlocking) {
  const fs::path d = fresh_temp_dir("hostile_special");
  ASSERT_EQ(::mkfifo((d / "x.png").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", d / "zero.jpg");
  fs::create_directories(d / "dir.png");
  // A FIFO with no writer would block a plain open for ever: the reader opens without blocking.
  EXPECT_NE(error_of([&] { read_image_file((d / "x.png").string()); }).find("FIFO"), std::string::npos);
  EXPECT_NE(error_of([&] { read_image_file((d / "zero.jpg").string()); }).find("device"), std::string::npos);
  EXPECT_NE(error_of([&] { read_image_file((d / "dir.png").string()); }).find("directory"), std::string::npos);
  fs::remove_all(d);
}

TEST(HostileImages, AHugeFileIsRefusedBeforeItIsRead) {
  const fs::path d = fresh_temp_dir("hostile_sparse");
  const fs::path sparse = d / "x.png";
  {
    const int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{3} << 30), 0);  // 3 GB of nothing, costing no disk
    ::close(fd);
  }
  const std::string err = error_of([&] { read_image_file(sparse.string()); });
  EXPECT_NE(err.find("larger than the 256 MiB an image may be"), std::string::npos) << err;
  // A smaller decode budget refuses a file larger than it at once, too.
  const std::vector<uint8_t> px = pixels(64, 64);
  write_file(d / "ok.png", encode_png(px.data(), 64, 64, 3));
  EXPECT_NE(error_of([&] { read_image_file((d / "ok.png").string(), {.max_bytes = 100}); }).find("MiB an image may be"),
            std::string::npos);
  fs::remove_all(d);
}

TEST(HostileImages, ADecodePastItsBudgetIsRefusedFromTheHeader) {
  const std::vector<uint8_t> px = pixels(300, 200);
  const fs::path d = fresh_temp_dir("hostile_budget");
  write_file(d / "a.jpg", encode_jpeg(px.data(), 300, 200, 3, 90));
  write_file(d / "a.png", encode_png(px.data(), 300, 200, 3));
  for (const char* f : {"a.jpg", "a.png"}) {
    const std::string err = error_of([&] { read_image_file((d / f).string(), {.max_bytes = 100000}); });
    EXPECT_NE(err.find("300x200 pixels, which take"), std::string::npos) << err;
    EXPECT_NO_THROW(read_image_file((d / f).string(), {.max_bytes = 1 << 20})) << f;
  }
  fs::remove_all(d);
}

TEST(HostileImages, AProgressiveJpegOfEndlessScansStopsQuickly) {
  const std::vector<uint8_t> fine = many_scans(20);
  EXPECT_NO_THROW(decode_image(fine.data(), fine.size(), "fine"));  // a few repeats: decoded
  const std::vector<uint8_t> endless = many_scans(2000);
  std::string err;
  const double s = seconds_of([&] { err = error_of([&] { decode_image(endless.data(), endless.size(), "endless"); }); });
  EXPECT_NE(err.find("more than 500 scans"), std::string::npos) << err;
  EXPECT_LT(s, 5.0);
}

TEST(HostileImages, AJpegCutShortIsRefusedAtItsEndNotDecodedAsGrey) {
  // A 1024x4096 JPEG whose scan is cut after a few hundred bytes: libjpeg would make its
  // 4 M pixels of grey (the fuzzer's find was a 378-byte file of 2636x16529 that took seconds).
  const int w = 1024, h = 4096;
  const std::vector<uint8_t> px = pixels(w, h);
  const std::vector<uint8_t> whole = encode_jpeg(px.data(), w, h, 3, 90);
  EXPECT_NO_THROW(decode_image(whole.data(), whole.size(), "whole"));
  const std::vector<uint8_t> cut(whole.begin(), whole.begin() + 700);
  std::string err;
  const double s = seconds_of([&] { err = error_of([&] { decode_image(cut.data(), cut.size(), "cut.jpg"); }); });
  EXPECT_NE(err.find("cut.jpg is not a readable JPEG: the file ends before its image data does"), std::string::npos)
      << err;
  EXPECT_LT(s, 0.5);
}

TEST(HostileImages, APngChunkLongerThanItsFileIsRefusedBeforeLibpngAllocatesIt) {
  // The fuzzer's find: a 12x10 PNG whose tEXt chunk claims 576 MiB; libpng allocated the
  // claimed length while reading the header.
  const std::vector<uint8_t> head = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a,            // signature
                                     0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 12, 0, 0, 0, 10,  // IHDR
                                     8, 4, 0, 0, 0, 0x2a, 0x25, 0x77, 0x71,                      // its CRC
                                     0x24, 0, 0, 0, 't', 'E', 'X', 't'};                         // tEXt
  std::vector<uint8_t> file = head;
  file.resize(head.size() + 100, 'x');  // the first of its claimed bytes
  std::string err;
  const double s = seconds_of([&] { err = error_of([&] { decode_image(file.data(), file.size(), "text.png"); }); });
  EXPECT_NE(err.find("its PNG chunk 'tEXt' claims 603979776 bytes, more than the file holds"),
            std::string::npos)
      << err;
  EXPECT_LT(s, 0.5);
}

TEST(HostileImages, AnEvaluationResizePastIntIsRefusedNotOverflowed) {
  RgbImage line;
  line.width = 1 << 24;
  line.height = 1;
  line.pixels.assign(size_t{3} << 24, 128);
  std::vector<float> out(224 * 224 * 3);
  const std::string err = error_of([&] { eval_transform(line, 224, kImageNetNormalisation, out.data()); });
  EXPECT_NE(err.find("past the 16777216 evaluation resizes to"), std::string::npos) << err;
  // The training crop of the same image is a 1x1 box: it resamples.
  EXPECT_NO_THROW(train_transform(line, 8, 1, kImageNetNormalisation, out.data()));
}

TEST(HostileImages, LinksThatLoopAreFollowedOnceAndDeepNestingIsRefused) {
  const fs::path d = fresh_temp_dir("hostile_links");
  trident::test_support::write_class_images(d, "train", 2, 3, 8, 8);
  fs::create_directory_symlink(".", d / "train" / "class0" / "x.jpg");   // a link to its own folder
  fs::create_directory_symlink("..", d / "train" / "class0" / "up");      // to the split's folder
  fs::create_directory_symlink(d / "train" / "class1", d / "train" / "class1" / "again");
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ASSERT_EQ(s.classes.size(), 2u);
  // Each class folder once: class0's three images, the split's other class reached through 'up'
  // (a folder met for the first time there), class1's three once more at most.
  EXPECT_LE(s.count(), 12);
  EXPECT_GE(s.count(), 6);
  fs::path deep = d / "train" / "class1";
  for (int i = 0; i < 40; ++i) deep /= "n";
  fs::create_directories(deep);
  const std::string err = error_of([&] { scan_image_folder(d.string(), "train"); });
  EXPECT_NE(err.find("folders deep in its class folder"), std::string::npos) << err;
  fs::remove_all(d);
}

TEST(HostileImages, TheLoaderSkipsAndCountsEachOfThem) {
  const fs::path d = fresh_temp_dir("hostile_loader");
  trident::test_support::write_class_images(d, "train", 2, 4, 12, 12);
  ASSERT_EQ(::mkfifo((d / "train" / "class0" / "fifo.png").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", d / "train" / "class1" / "zero.jpg");
  const std::vector<uint8_t> bytes = many_scans(2000);
  write_file(d / "train" / "class1" / "scans.jpg", bytes);
  ImageStreamOptions o;
  o.image_size = 8;
  o.batch = 4;
  o.workers = 2;
  o.train = false;  // every file is visited once, in order: all three are met
  ImageFolderBatches src(scan_image_folder(d.string(), "train"), o);
  std::vector<float> images(static_cast<size_t>(4 * src.sample_size()));
  std::vector<int32_t> labels(4);
  src.start_epoch(0);
  int batches = 0, unscored = 0;
  int64_t filled = 0;
  while (src.next(images.data(), labels.data(), &filled)) {
    ++batches;
    for (int64_t r = 0; r < filled; ++r) unscored += labels[static_cast<size_t>(r)] < 0;
  }
  EXPECT_EQ(batches, 3);  // 11 files in batches of 4
  EXPECT_EQ(unscored, 3);
  EXPECT_EQ(src.skipped(), 3);
  fs::remove_all(d);
}
