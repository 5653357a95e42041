// Image folders: class discovery and the layout's refusals (one sentence each), and the
// streaming loader: the same batches bitwise for any worker count, a bounded ring, unreadable
// images skipped and counted, evaluation's padded last batch, known pixels end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"
#include "runtime/data/image_transform.h"
#include "runtime/data/random.h"
#include "runtime/data/sharded_batches.h"
#include "support/error_of.h"
#include "support/image_folder.h"
#include "support/temp_dir.h"

using namespace trident::data;
using trident::test_support::error_of;
using trident::test_support::fresh_temp_dir;
using trident::test_support::write_class_images;
using trident::test_support::write_file;
namespace fs = std::filesystem;

namespace {

struct Epoch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<int64_t> filled;
};

Epoch read_epoch(BatchSource& src, int64_t sample, int64_t epoch) {
  Epoch e;
  std::vector<float> images(static_cast<size_t>(src.batch() * sample));
  std::vector<int32_t> labels(static_cast<size_t>(src.batch()));
  int64_t filled = 0;
  src.start_epoch(epoch);
  while (src.next(images.data(), labels.data(), &filled)) {
    e.images.insert(e.images.end(), images.begin(), images.end());
    e.labels.insert(e.labels.end(), labels.begin(), labels.end());
    e.filled.push_back(filled);
  }
  return e;
}

ImageStreamOptions stream(int workers, bool train, int64_t batch = 4) {
  ImageStreamOptions o;
  o.image_size = 12;
  o.batch = batch;
  o.train = train;
  o.seed = 3;
  o.workers = workers;
  o.depth = 2;
  return o;
}

}  // namespace

TEST(ImageFolder, ClassesAreTheSortedFolderNames) {
  const fs::path d = fresh_temp_dir("folder_classes");
  const std::vector<uint8_t> px = trident::test_support::class_pixels(8, 8, 0, 0);
  for (const char* c : {"zebra", "ant", "Moose"})
    for (const char* f : {"b.png", "a.png"}) write_file(d / "train" / c / f, encode_png(px.data(), 8, 8, 3));
  write_file(d / "train" / ".DS_Store", {1, 2, 3});  // hidden: passed over
  EXPECT_TRUE(is_image_folder_dir(d.string()));
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  EXPECT_EQ(s.classes, (std::vector<std::string>{"Moose", "ant", "zebra"}));
  ASSERT_EQ(s.count(), 6);
  EXPECT_EQ(s.labels, (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(s.files[2], (d / "train" / "ant" / "a.png").string());
  EXPECT_EQ(s.skipped_files, 0);
  fs::remove_all(d);
}

// A limit keeps a seeded sample drawn from every class, in listing order: the first N files would
// be the first classes only (a run limited to 100 images of 10 classes trained on one).
TEST(ImageFolder, ALimitSamplesEveryClassFromTheSeed) {
  const fs::path d = fresh_temp_dir("folder_limit");
  write_class_images(d, "train", 5, 20, 8, 8);
  const ImageFolderSplit all = scan_image_folder(d.string(), "train");
  ASSERT_EQ(all.count(), 100);
  const ImageFolderSplit a = scan_image_folder(d.string(), "train", 20, nullptr, 7);
  ASSERT_EQ(a.count(), 20);
  EXPECT_EQ(a.name, (d / "train").string() + "[20 of 100, seed 7]");
  std::set<int32_t> classes(a.labels.begin(), a.labels.end());
  EXPECT_GE(classes.size(), 3u) << "a sample of 20 from 5 classes of 20 reaches most classes";
  EXPECT_TRUE(std::is_sorted(a.files.begin(), a.files.end())) << "kept in listing order";
  for (size_t i = 0; i < a.files.size(); ++i) {
    const auto at = std::find(all.files.begin(), all.files.end(), a.files[i]);
    ASSERT_NE(at, all.files.end());
    EXPECT_EQ(a.labels[i], all.labels[static_cast<size_t>(at - all.files.begin())]) << a.files[i];
  }
  EXPECT_EQ(scan_image_folder(d.string(), "train", 20, nullptr, 7).files, a.files) << "the same seed, the same sample";
  EXPECT_NE(scan_image_folder(d.string(), "train", 20, nullptr, 8).files, a.files) << "another seed, another sample";
  EXPECT_EQ(scan_image_folder(d.string(), "train", 100, nullptr, 7).files, all.files) << "a limit of all is all";
  fs::remove_all(d);
}

// Files that are no JPEG or PNG — notes beside the images, a README beside the class folders —
// are passed over and counted, as torchvision's ImageFolder passes them over.
TEST(ImageFolder, OtherFilesAreSkippedAndCounted) {
  const fs::path d = fresh_temp_dir("folder_others");
  write_class_images(d, "train", 2, 3, 8, 8);
  write_file(d / "train" / "class1" / "notes.txt", {'h', 'i'});
  write_file(d / "train" / "README.md", {'#'});
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  EXPECT_EQ(s.count(), 6);
  EXPECT_EQ(s.classes.size(), 2u);
  EXPECT_EQ(s.skipped_files, 2);
  EXPECT_FALSE(s.first_skipped.empty());
  fs::remove_all(d);
}

TEST(ImageFolder, LayoutErrorsNameWhatIsWrong) {
  const fs::path d = fresh_temp_dir("folder_errors");
  const std::string layout =
      "; an image folder holds DIR/train/<class>/ and DIR/val/<class>/ with .jpg, .jpeg or .png images";
  write_class_images(d, "val", 2, 1, 8, 8);
  EXPECT_EQ(error_of([&] { scan_image_folder(d.string(), "train"); }),
            "the image folder '" + d.string() + "' has no train/ folder" + layout);

  write_class_images(d, "train", 2, 1, 8, 8);
  fs::create_directories(d / "train" / "empty");
  EXPECT_EQ(error_of([&] { scan_image_folder(d.string(), "train"); }),
            "the class folder '" + (d / "train" / "empty").string() + "' holds no images" + layout);
  fs::remove(d / "train" / "empty");

  // A class folder whose files are none of them images holds no images.
  fs::create_directories(d / "train" / "texts");
  write_file(d / "train" / "texts" / "notes.txt", {'h', 'i'});
  EXPECT_EQ(error_of([&] { scan_image_folder(d.string(), "train"); }),
            "the class folder '" + (d / "train" / "texts").string() + "' holds no images" + layout);
  fs::remove_all(d / "train" / "texts");

  const ImageFolderSplit train = scan_image_folder(d.string(), "train");
  fs::rename(d / "val" / "class1", d / "val" / "class9");
  EXPECT_EQ(error_of([&] { scan_image_folder(d.string(), "val", 0, &train.classes); }),
            "the classes of '" + (d / "val").string() +
                "' differ from the training classes ('class1' is missing); both splits need the same class folders");
  fs::remove_all(d);
}

TEST(ImageFolderBatches, SameBatchesForAnyWorkerCount) {
  const fs::path d = fresh_temp_dir("stream_workers");
  write_class_images(d, "train", 3, 7, 20, 16);
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ImageFolderBatches one(s, stream(1, true)), four(s, stream(4, true));
  const int64_t sample = one.sample_size();
  const Epoch a0 = read_epoch(one, sample, 0), b0 = read_epoch(four, sample, 0);
  ASSERT_EQ(a0.filled.size(), 5u);  // 21 images, batch 4, the last partial batch dropped
  ASSERT_EQ(a0.images.size(), b0.images.size());
  EXPECT_EQ(std::memcmp(a0.images.data(), b0.images.data(), a0.images.size() * sizeof(float)), 0);
  EXPECT_EQ(a0.labels, b0.labels);
  const Epoch a1 = read_epoch(one, sample, 1), b1 = read_epoch(four, sample, 1);
  EXPECT_EQ(std::memcmp(a1.images.data(), b1.images.data(), a1.images.size() * sizeof(float)), 0);
  EXPECT_NE(a0.images, a1.images);  // a new shuffle and new crops
  // Going back to epoch 0 gives it again: nothing depends on the epochs in between.
  const Epoch again = read_epoch(four, sample, 0);
  EXPECT_EQ(std::memcmp(a0.images.data(), again.images.data(), a0.images.size() * sizeof(float)), 0);
  fs::remove_all(d);
}

TEST(ImageFolderBatches, WorkersStayWithinTheRing) {
  const fs::path d = fresh_temp_dir("stream_bound");
  write_class_images(d, "train", 2, 10, 10, 10);
  ImageFolderBatches src(scan_image_folder(d.string(), "train"), stream(4, true, 2));
  EXPECT_EQ(src.ring_bytes(), 2u * 2 * (12 * 12 * 3 * 4 + 4));
  src.start_epoch(0);
  // Depth 2, batch 2: four samples made ahead, not the twenty the epoch holds.
  EXPECT_EQ(src.wait_until_idle(), 4);
  std::vector<float> images(static_cast<size_t>(2 * src.sample_size()));
  ASSERT_TRUE(src.next(images.data(), nullptr));
  EXPECT_EQ(src.wait_until_idle(), 4);
  for (int i = 1; i < 9; ++i) ASSERT_TRUE(src.next(images.data(), nullptr));
  EXPECT_EQ(src.wait_until_idle(), 2);  // only the last batch is left to make
  ASSERT_TRUE(src.next(images.data(), nullptr));
  EXPECT_FALSE(src.next(images.data(), nullptr));
  fs::remove_all(d);
}

// next_in_place hands out the batches next() writes, from the ring itself, and no worker
// rewrites a batch's slot while it is being taken (the workers, left to run until they have
// nothing they may make, leave it as it was).
TEST(ImageFolderBatches, BatchesHandedOutInPlaceAreTheOnesNextWrites) {
  const fs::path d = fresh_temp_dir("stream_in_place");
  write_class_images(d, "train", 3, 7, 20, 16);
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  ImageFolderBatches copied(s, stream(2, true)), in_place(s, stream(3, true));
  ASSERT_TRUE(in_place.hands_out_in_place());
  const int64_t floats = in_place.batch() * in_place.sample_size();
  const Epoch want = read_epoch(copied, copied.sample_size(), 1);
  Epoch got;
  std::vector<int32_t> labels(static_cast<size_t>(in_place.batch()));
  int64_t filled = 0;
  in_place.start_epoch(1);
  while (in_place.next_in_place(
      [&](const float* images) {
        const std::vector<float> before(images, images + floats);
        in_place.wait_until_idle();
        EXPECT_EQ(std::memcmp(before.data(), images, before.size() * sizeof(float)), 0)
            << "a worker rewrote the batch being taken";
        got.images.insert(got.images.end(), before.begin(), before.end());
      },
      labels.data(), &filled)) {
    got.labels.insert(got.labels.end(), labels.begin(), labels.end());
    got.filled.push_back(filled);
  }
  ASSERT_EQ(got.images.size(), want.images.size());
  EXPECT_EQ(std::memcmp(got.images.data(), want.images.data(), want.images.size() * sizeof(float)), 0);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.filled, want.filled);
  fs::remove_all(d);
}

TEST(ImageFolderBatches, UnreadableImagesAreSkippedAndCounted) {
  const fs::path d = fresh_temp_dir("stream_corrupt");
  write_class_images(d, "train", 2, 4, 10, 10);
  const fs::path bad = d / "train" / "class1" / "img000.jpg";
  write_file(bad, {0xFF, 0xD8, 0xFF, 0x00, 0x13, 0x37});
  ImageFolderBatches src(scan_image_folder(d.string(), "train"), stream(2, true, 3));
  const Epoch e = read_epoch(src, src.sample_size(), 0);
  EXPECT_EQ(e.filled.size(), 3u);  // 9 files: three full batches, the bad one's place taken
  EXPECT_EQ(src.skipped(), 1);
  EXPECT_EQ(src.first_skip_reason().rfind("'" + bad.string() + "' is not a readable JPEG: ", 0), 0u)
      << src.first_skip_reason();

  const fs::path none = fresh_temp_dir("stream_all_corrupt");
  write_file(none / "train" / "a" / "x.png", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0});
  ImageFolderBatches broken(scan_image_folder(none.string(), "train"), stream(1, true, 1));
  std::vector<float> images(static_cast<size_t>(4 * broken.sample_size()));
  broken.start_epoch(0);
  const std::string err = error_of([&] { broken.next(images.data(), nullptr); });
  EXPECT_EQ(err.rfind("no image of '" + (none / "train").string() + "' can be read (the first: '", 0), 0u) << err;
  fs::remove_all(d);
  fs::remove_all(none);
}

// Evaluation scores the images it can read and only those: an unreadable one is not replaced by
// another (which would count that one twice), its row is labelled -1 and it is counted.
TEST(ImageFolderBatches, EvaluationLeavesUnreadableImagesOut) {
  const fs::path d = fresh_temp_dir("stream_eval_corrupt");
  write_class_images(d, "val", 2, 3, 10, 10);
  write_file(d / "val" / "class0" / "img100.jpg", {0xFF, 0xD8, 0xFF, 0x00, 0x13, 0x37});
  ImageFolderBatches src(scan_image_folder(d.string(), "val"), stream(2, false, 6));
  const Epoch e = read_epoch(src, src.sample_size(), 0);
  ASSERT_EQ(e.labels.size(), 6u);
  EXPECT_EQ(std::count(e.labels.begin(), e.labels.end(), -1), 1);
  EXPECT_EQ(e.labels[0], -1) << "the first file of class0 is the bad one";
  EXPECT_EQ(src.skipped(), 1);
  fs::remove_all(d);
}

TEST(ImageFolderBatches, EvaluationPadsTheLastBatchWithKnownPixels) {
  // PNGs of the size evaluation keeps (12 -> shorter side round(13.7) = 14, so 14x14 is kept
  // whole and its centre 12x12 cropped from (1, 1)): the outputs are the normalised pixels.
  const fs::path d = fresh_temp_dir("stream_eval");
  for (int i = 0; i < 5; ++i) {
    const std::vector<uint8_t> px = trident::test_support::class_pixels(14, 14, i % 2, i);
    write_file(d / "val" / ("c" + std::to_string(i % 2)) / ("p" + std::to_string(i) + ".png"),
               encode_png(px.data(), 14, 14, 3));
  }
  const ImageFolderSplit s = scan_image_folder(d.string(), "val");
  ImageFolderBatches src(s, stream(3, false));
  const int64_t sample = src.sample_size();
  const Epoch e = read_epoch(src, sample, 0);
  EXPECT_EQ(e.filled, (std::vector<int64_t>{4, 1}));
  ASSERT_EQ(e.labels.size(), 8u);
  EXPECT_EQ(e.labels, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1}));
  // Rows 5..7 repeat row 4, the last batch's only real sample.
  for (int r = 5; r < 8; ++r)
    EXPECT_EQ(std::memcmp(&e.images[r * sample], &e.images[4 * sample], sample * sizeof(float)), 0) << r;
  // Row 0 is the first file in order, c0/p0.png.
  const std::vector<uint8_t> px = trident::test_support::class_pixels(14, 14, 0, 0);
  const Normalisation& n = kImageNetNormalisation;
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 12; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_NEAR(e.images[(y * 12 + x) * 3 + c], (px[((y + 1) * 14 + x + 1) * 3 + c] / 255.0 - n.mean[c]) / n.std[c],
                    1e-5);
  fs::remove_all(d);
}

// A data-parallel rank's share: ShardedBatches over an image folder has it make only rows
// [r·B, (r+1)·B) of each global batch (BatchSource::keep_rows), bit for bit the rows the whole
// batch holds there — training's shuffled crops and evaluation's padded last batch alike — and
// no more: the ring holds depth·B samples, not depth·(ranks·B).
TEST(ImageFolderBatches, ARankMakesOnlyItsRowsOfEachGlobalBatch) {
  const fs::path d = fresh_temp_dir("stream_shard");
  write_class_images(d, "train", 3, 7, 20, 16);  // 21 images
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  for (const bool train : {true, false}) {
    SCOPED_TRACE(train ? "train" : "eval");
    ImageFolderBatches whole(s, stream(2, train, 6));
    const int64_t sample = whole.sample_size();
    const Epoch all = read_epoch(whole, sample, 1);
    const size_t batches = all.filled.size();
    ASSERT_EQ(batches, train ? 3u : 4u);
    for (int rank = 0; rank < 3; ++rank) {
      SCOPED_TRACE(rank);
      ShardedBatches mine(std::make_unique<ImageFolderBatches>(s, stream(2, train, 6)), rank, 3, sample);
      ASSERT_EQ(mine.batch(), 2);
      const Epoch part = read_epoch(mine, sample, 1);
      ASSERT_EQ(part.filled.size(), batches);
      for (size_t b = 0; b < batches; ++b) {
        const size_t first = b * 6 + static_cast<size_t>(rank) * 2;
        EXPECT_EQ(std::memcmp(part.images.data() + b * 2 * sample, all.images.data() + first * sample,
                              2 * sample * sizeof(float)),
                  0)
            << "batch " << b;
        EXPECT_EQ(part.labels[b * 2], all.labels[first]);
        EXPECT_EQ(part.labels[b * 2 + 1], all.labels[first + 1]);
        EXPECT_EQ(part.filled[b], std::clamp<int64_t>(all.filled[b] - rank * 2, 0, 2));
      }
    }
  }
  ImageFolderBatches two_rows(s, stream(4, true, 6));
  ASSERT_TRUE(two_rows.keep_rows(2, 2));
  two_rows.start_epoch(0);
  EXPECT_EQ(two_rows.wait_until_idle(), 4);  // depth 2 · 2 rows, not 2 · 6
  EXPECT_EQ(error_of([&] { two_rows.keep_rows(0, 2); }).find("was called after start_epoch") != std::string::npos, true);
  ImageFolderBatches outside(s, stream(1, true, 6));
  EXPECT_NE(error_of([&] { outside.keep_rows(5, 2); }).find("are not within a batch of 6"), std::string::npos);
  fs::remove_all(d);
}

// Training decodes only each sample's crop (read_image_region): every sample is bit for bit
// train_transform of the whole decoded image, with the sample's own seed.
TEST(ImageFolderBatches, TrainingSamplesAreTheWholeImagesTransform) {
  const fs::path d = fresh_temp_dir("stream_region");
  write_class_images(d, "train", 3, 6, 64, 48);  // JPEG and PNG in turn
  const ImageFolderSplit s = scan_image_folder(d.string(), "train");
  const ImageStreamOptions o = stream(2, true);
  ImageFolderBatches src(s, o);
  const int64_t sample = src.sample_size();
  const Epoch e = read_epoch(src, sample, 2);
  const std::vector<int64_t> order = epoch_order(s.count(), true, o.seed, 2);
  ASSERT_EQ(e.filled.size(), 4u);
  std::vector<float> want(static_cast<size_t>(sample));
  for (size_t row = 0; row < e.labels.size(); ++row) {
    const int64_t index = order[row];
    train_transform(read_image_file(s.files[static_cast<size_t>(index)]), o.image_size, augmentation_seed(o.seed, 2, index),
                    o.norm, want.data());
    EXPECT_EQ(std::memcmp(e.images.data() + row * sample, want.data(), want.size() * sizeof(float)), 0)
        << "row " << row << ", " << s.files[static_cast<size_t>(index)];
    EXPECT_EQ(e.labels[row], s.labels[static_cast<size_t>(index)]);
  }
  fs::remove_all(d);
}
