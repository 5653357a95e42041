// An image folder's batches handed out as requests for a device decoder (BatchSource::
// next_images): which JPEGs go out as bytes (read_jpeg_header's plain kind), and that a request
// decoded and resampled with its own geometry is, bit for bit, the sample the CPU path makes —
// the crop, the flip and the label — for training and evaluation; files it cannot take come
// made on the host, and so does a row the device gives back.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "runtime/data/image_codec.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"
#include "runtime/data/image_transform.h"
#include "runtime/data/sharded_batches.h"
#include "support/error_of.h"
#include "support/image_folder.h"
#include "support/temp_dir.h"

using namespace trident::data;
using trident::HostRowMaker;
using trident::ImageBatchRequest;
using trident::ImageRowRequest;
using trident::test_support::class_pixels;
using trident::test_support::error_of;
using trident::test_support::fresh_temp_dir;
using trident::test_support::write_class_images;
using trident::test_support::write_file;
namespace fs = std::filesystem;

namespace {

ImageStreamOptions options(bool train) {
  ImageStreamOptions o;
  o.image_size = 16;
  o.batch = 4;
  o.train = train;
  o.seed = 5;
  o.workers = 2;
  o.depth = 2;
  return o;
}

// The row a device makes from a request, made here with the CPU's decoder and resampler.
std::vector<float> made_like_a_device(const ImageBatchRequest& b, const ImageRowRequest& q) {
  const size_t floats = static_cast<size_t>(b.image_size) * b.image_size * 3;
  std::vector<float> row(floats);
  if (!q.jpeg) {
    std::memcpy(row.data(), q.bytes, floats * sizeof(float));
    return row;
  }
  const RgbImage image = decode_image(q.bytes, q.size, "a request's JPEG");
  EXPECT_EQ(image.height, q.height);
  EXPECT_EQ(image.width, q.width);
  resample_normalised(image, {q.box_top, q.box_left, q.box_height, q.box_width}, q.resize_height, q.resize_width,
                      {q.window_top, q.window_left, b.image_size, b.image_size}, q.flip, kImageNetNormalisation,
                      row.data());
  return row;
}

// A folder of JPEGs and PNGs, one progressive JPEG and one gray JPEG among them.
fs::path mixed_folder(const std::string& name, const std::string& split) {
  const fs::path d = fresh_temp_dir(name);
  write_class_images(d, split, 2, 5, 40, 30);
  const std::vector<uint8_t> px = class_pixels(36, 28, 1, 9);
  write_file(d / split / "class1" / "progressive.jpg", encode_jpeg(px.data(), 36, 28, 3, 90, true));
  std::vector<uint8_t> gray(36 * 28);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = px[3 * i];
  write_file(d / split / "class0" / "gray.jpg", encode_jpeg(gray.data(), 36, 28, 1, 90));
  return d;
}

void expect_requests_make_the_cpu_batches(bool train) {
  const std::string split = train ? "train" : "val";
  const fs::path d = mixed_folder(train ? "requests_train" : "requests_eval", split);
  const ImageFolderSplit s = scan_image_folder(d.string(), split);
  ImageFolderBatches cpu(s, options(train)), dev(s, options(train));
  const size_t floats = static_cast<size_t>(cpu.sample_size());
  std::vector<float> want(cpu.batch() * floats);
  std::vector<int32_t> want_labels(4), labels(4);
  ASSERT_TRUE(dev.can_hand_out_images());
  dev.hand_out_images(true);
  cpu.start_epoch(1);
  dev.start_epoch(1);
  int jpeg_rows = 0, host_rows = 0;
  while (cpu.next(want.data(), want_labels.data())) {
    ASSERT_TRUE(dev.next_images(
        [&](const ImageBatchRequest& b, const HostRowMaker& on_host) {
          ASSERT_EQ(b.rows.size(), 4u);
          for (size_t r = 0; r < b.rows.size(); ++r) {
            const std::vector<float> got = made_like_a_device(b, b.rows[r]);
            EXPECT_EQ(std::memcmp(got.data(), want.data() + r * floats, floats * sizeof(float)), 0) << "row " << r;
            (b.rows[r].jpeg ? jpeg_rows : host_rows)++;
            std::vector<float> again(floats);
            on_host(static_cast<int>(r), again.data());  // as for a file the device gave back
            EXPECT_EQ(std::memcmp(again.data(), want.data() + r * floats, floats * sizeof(float)), 0) << "row " << r;
          }
        },
        labels.data()));
    EXPECT_EQ(labels, want_labels);
  }
  EXPECT_FALSE(dev.next_images([](const ImageBatchRequest&, const HostRowMaker&) {}, labels.data()));
  EXPECT_GT(jpeg_rows, 0) << "baseline and gray JPEGs go out as files";
  EXPECT_GT(host_rows, 0) << "PNGs and the progressive JPEG are made on the host";
  fs::remove_all(d);
}

}  // namespace

TEST(JpegHeader, SaysWhichFilesArePlain) {
  const std::vector<uint8_t> px = class_pixels(20, 12, 0, 1);
  const std::vector<uint8_t> plain = encode_jpeg(px.data(), 20, 12, 3, 90);
  const auto h = read_jpeg_header(plain.data(), plain.size(), "plain");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->height, 12);
  EXPECT_EQ(h->width, 20);
  EXPECT_TRUE(h->plain);
  const std::vector<uint8_t> gray = encode_jpeg(px.data(), 20, 12, 1, 90);
  EXPECT_TRUE(read_jpeg_header(gray.data(), gray.size(), "gray")->plain);
  const std::vector<uint8_t> progressive = encode_jpeg(px.data(), 20, 12, 3, 90, true);
  EXPECT_FALSE(read_jpeg_header(progressive.data(), progressive.size(), "progressive")->plain);
  std::vector<uint8_t> cmyk_px(20 * 12 * 4, 100);
  const std::vector<uint8_t> cmyk = encode_jpeg(cmyk_px.data(), 20, 12, 4, 90);
  EXPECT_FALSE(read_jpeg_header(cmyk.data(), cmyk.size(), "cmyk")->plain);
  const std::vector<uint8_t> truncated(plain.begin(), plain.end() - 40);
  EXPECT_FALSE(read_jpeg_header(truncated.data(), truncated.size(), "truncated")->plain);
  const std::vector<uint8_t> png = encode_png(px.data(), 20, 12, 3);
  EXPECT_FALSE(read_jpeg_header(png.data(), png.size(), "png").has_value());
  const std::vector<uint8_t> junk = {0xFF, 0xD8, 0xFF, 0x00, 0x01};
  EXPECT_NE(error_of([&] { read_jpeg_header(junk.data(), junk.size(), "'junk.jpg'"); }).find("'junk.jpg' is not a readable JPEG"),
            std::string::npos);
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_NE(error_of([&] { read_jpeg_header(text.data(), text.size(), "'a.jpg'"); }).find("neither a JPEG nor a PNG"),
            std::string::npos);
}

TEST(ImageRequests, TrainingRequestsMakeTheCpuPathsSamples) { expect_requests_make_the_cpu_batches(true); }

TEST(ImageRequests, EvaluationRequestsMakeTheCpuPathsSamples) { expect_requests_make_the_cpu_batches(false); }

TEST(ImageRequests, UnreadableFilesAreReplacedAndCounted) {
  const fs::path d = fresh_temp_dir("requests_unreadable");
  write_class_images(d, "train", 2, 4, 40, 30);
  write_file(d / "train" / "class0" / "broken.jpg", {0xFF, 0xD8, 0xFF, 0xE0, 0, 3});
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ImageFolderBatches cpu(s, options(true)), dev(s, options(true));
  dev.hand_out_images(true);
  std::vector<float> want(cpu.batch() * cpu.sample_size());
  std::vector<int32_t> want_labels(4), labels(4);
  cpu.start_epoch(0);
  dev.start_epoch(0);
  while (cpu.next(want.data(), want_labels.data())) {
    ASSERT_TRUE(dev.next_images([](const ImageBatchRequest&, const HostRowMaker&) {}, labels.data()));
    EXPECT_EQ(labels, want_labels);
  }
  EXPECT_EQ(dev.skipped(), cpu.skipped());
  EXPECT_EQ(dev.skipped(), 1);
  fs::remove_all(d);
}

// A data-parallel rank's share (ShardedBatches over a source that makes only its rows) hands out
// the requests of its rows of each global batch.
TEST(ImageRequests, ARankHandsOutItsRowsRequests) {
  const fs::path d = mixed_folder("requests_rank", "train");
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ImageFolderBatches whole(s, options(true));
  ShardedBatches rank(std::make_unique<ImageFolderBatches>(s, options(true)), 1, 2, whole.sample_size());
  ASSERT_TRUE(rank.can_hand_out_images());
  whole.hand_out_images(true);
  rank.hand_out_images(true);
  whole.start_epoch(0);
  rank.start_epoch(0);
  std::vector<int32_t> whole_labels(4), rank_labels(2);
  std::vector<std::vector<float>> want;
  while (whole.next_images(
      [&](const ImageBatchRequest& b, const HostRowMaker&) {
        want.clear();
        for (size_t r = 2; r < 4; ++r) want.push_back(made_like_a_device(b, b.rows[r]));
      },
      whole_labels.data())) {
    ASSERT_TRUE(rank.next_images(
        [&](const ImageBatchRequest& b, const HostRowMaker&) {
          ASSERT_EQ(b.rows.size(), 2u);
          for (size_t r = 0; r < 2; ++r) EXPECT_EQ(made_like_a_device(b, b.rows[r]), want[r]) << "row " << r;
        },
        rank_labels.data()));
    EXPECT_EQ(rank_labels[0], whole_labels[2]);
    EXPECT_EQ(rank_labels[1], whole_labels[3]);
  }
  fs::remove_all(d);
}

TEST(ImageRequests, EachWayOutRefusesTheOther) {
  const fs::path d = fresh_temp_dir("requests_refuse");
  write_class_images(d, "train", 2, 4, 40, 30);
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ImageFolderBatches src(s, options(true));
  std::vector<float> images(src.batch() * src.sample_size());
  src.start_epoch(0);
  EXPECT_NE(error_of([&] { src.next_images([](const ImageBatchRequest&, const HostRowMaker&) {}, nullptr); })
                .find("without hand_out_images(true)"),
            std::string::npos);
  src.hand_out_images(true);
  src.start_epoch(0);
  EXPECT_NE(error_of([&] { src.next(images.data(), nullptr); }).find("use next_images()"), std::string::npos);
  fs::remove_all(d);
}
