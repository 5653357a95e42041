// The data of a training run (see train_data.h): only what the limits ask for is read, and its
// memory claimed from the budget first; an image folder holds only its batch rings.
#include "runtime/data/train_data.h"

#include "core/error.h"
#include "core/printable.h"
#include "runtime/data/batch_iterator.h"

namespace trident::data {

namespace {

constexpr int kDefaultImageSize = 224;

std::string shape_sentence(int64_t h, int64_t w, int64_t c, int64_t classes) {
  return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " images in " +
         std::to_string(classes) + " classes";
}

// The synthetic images (one draw split in two, so the test images share the training classes'
// templates) or the dataset in --data, checked against the model's shape.
void load_in_memory(const TrainDataOptions& f, const frontend::ModelInfo& info, Dataset& train, Dataset& test,
                    MemoryBudget& budget, bool with_train) {
  if (f.synthetic) {
    const int64_t n_train = f.train_limit ? f.train_limit : 4096, n_test = f.test_limit ? f.test_limit : 1024;
    const uint64_t bytes = static_cast<uint64_t>(n_train + n_test) *
                           (static_cast<uint64_t>(info.height) * info.width * info.channels + 1) * 4;
    budget.claim(bytes, "the synthetic images", "lower --train-limit or --test-limit");
    budget.check(bytes, "splitting the synthetic images", "lower --train-limit or --test-limit");
    Dataset all = make_synthetic(n_train + n_test, info.height, info.width, info.channels,
                                             info.classes, f.seed);
    train = subset(all, 0, n_train);
    test = subset(all, n_train, n_test);
    return;
  }
  const std::string dir = f.dir.empty() ? default_fashion_mnist_dir() : f.dir;
  // Without the training split, its first image stands in for the shape check below.
  train = load_image_dataset(dir, "train", {with_train ? f.train_limit : 1, &budget, "use --train-limit"});
  test = load_image_dataset(dir, "test", {f.test_limit, &budget, "use --test-limit"});
  if (train.height != info.height || train.width != info.width || train.channels != info.channels ||
      train.num_classes != info.classes)
    throw Error(quoted_name(dir) + " holds " + train.name + " (" +
                shape_sentence(train.height, train.width, train.channels, train.num_classes) +
                "), which does not fit model '" + info.name + "' (" +
                shape_sentence(info.height, info.width, info.channels, info.classes) +
                "); train it on data of that shape (or --synthetic)");
}

}  // namespace

std::optional<ImageFolderInput> find_image_folder(const TrainDataOptions& f, int model_size) {
  if (f.synthetic || f.dir.empty() || !is_image_folder_dir(f.dir)) {
    if (f.image_size != 0)
      throw Error("--image-size applies to image folders (DIR/train/<class>/, DIR/val/<class>/) only, and " +
                  std::string(f.synthetic ? "--synthetic data" : "this --data") + " is none");
    return std::nullopt;
  }
  ImageFolderInput in;
  in.image_size = f.image_size != 0 ? f.image_size : model_size != 0 ? model_size : kDefaultImageSize;
  in.train = scan_image_folder(f.dir, "train", f.train_limit, nullptr, f.seed);
  in.val = scan_image_folder(f.dir, "val", f.test_limit, &in.train.classes, f.seed);
  return in;
}

TrainData load_data(const TrainDataOptions& f, const frontend::ModelInfo& info, std::optional<ImageFolderInput> folder,
                    MemoryBudget& budget, bool with_train) {
  TrainData d;
  if (!folder) {
    d.train_set_ = std::make_unique<Dataset>();
    d.eval_set_ = std::make_unique<Dataset>();
    load_in_memory(f, info, *d.train_set_, *d.eval_set_, budget, with_train);
    if (with_train && f.batch > d.train_set_->count)
      throw Error("--batch " + std::to_string(f.batch) + " is larger than the " +
                  std::to_string(d.train_set_->count) + " training images");
    d.name = d.train_set_->name;
    d.eval_split = "test";
    d.train_count = d.train_set_->count;
    d.eval_count = d.eval_set_->count;
    if (with_train) d.train = std::make_unique<BatchIterator>(*d.train_set_, f.batch, true, f.seed, true);
    d.eval = std::make_unique<BatchIterator>(*d.eval_set_, f.batch, false, 0, false);
    return d;
  }
  const int64_t s = folder->image_size, classes = static_cast<int64_t>(folder->train.classes.size());
  for (const ImageFolderSplit* split : {&folder->train, &folder->val})
    if (split->skipped_files > 0)
      d.listing_report_ += std::string(d.listing_report_.empty() ? "" : "; ") + "passed over " +
                           std::to_string(split->skipped_files) + " file" + (split->skipped_files == 1 ? "" : "s") +
                           " of " + quoted_name(split->dir) + " that " + (split->skipped_files == 1 ? "is" : "are") +
                           " no .jpg, .jpeg or .png image (the first: " + quoted_name(split->first_skipped) + ")";
  if (info.height != s || info.width != s || info.channels != 3 || info.classes != classes)
    throw Error("model '" + info.name + "' takes " + shape_sentence(info.height, info.width, info.channels, info.classes) +
                ", but the image folder " + quoted_name(f.dir) + " gives " + shape_sentence(s, s, 3, classes) +
                " (--image-size " + std::to_string(s) + ")");
  if (with_train && f.batch > folder->train.count())
    throw Error("--batch " + std::to_string(f.batch) + " is larger than the " +
                std::to_string(folder->train.count()) + " training images");
  ImageStreamOptions o;
  o.image_size = folder->image_size;
  o.batch = f.batch;
  o.seed = f.seed;
  o.workers = f.workers != 0 ? f.workers : default_image_workers();
  d.name = folder->train.name;
  d.eval_split = "val";
  d.train_count = folder->train.count();
  d.eval_count = folder->val.count();
  d.streamed = true;
  // Both splits' rings; one split's workers decode at a time (evaluation follows the epoch).
  budget.claim((with_train ? 2 : 1) * image_ring_bytes(o) + image_worker_bytes(o),
               "the image batches decoded ahead and " + std::to_string(o.workers) + " workers' decodes",
               "lower --workers, --batch or --image-size");
  if (with_train) {
    o.train = true;
    auto train = std::make_unique<ImageFolderBatches>(std::move(folder->train), o);
    d.train_stream_ = train.get();
    d.train = std::move(train);
  }
  o.train = false;
  auto eval = std::make_unique<ImageFolderBatches>(std::move(folder->val), o);
  d.eval_stream_ = eval.get();
  d.eval = std::move(eval);
  return d;
}

TrainData load_train_data(const TrainDataOptions& f, const frontend::ModelInfo& info,
                          std::optional<ImageFolderInput> folder, MemoryBudget& budget) {
  return load_data(f, info, std::move(folder), budget, true);
}

TrainData load_eval_data(const TrainDataOptions& f, const frontend::ModelInfo& info, std::optional<ImageFolderInput> folder,
                         MemoryBudget& budget) {
  return load_data(f, info, std::move(folder), budget, false);
}

int64_t TrainData::skipped_images() const {
  int64_t n = 0;
  for (const ImageFolderBatches* s : {train_stream_, eval_stream_})
    if (s != nullptr) n += s->skipped();
  return n;
}

std::string TrainData::skipped_report() const {
  std::string report = listing_report_;
  for (const ImageFolderBatches* s : {train_stream_, eval_stream_}) {
    if (s == nullptr || s->skipped() == 0) continue;
    if (!report.empty()) report += "; ";
    report += "skipped " + std::to_string(s->skipped()) + " unreadable image" + (s->skipped() == 1 ? "" : "s") +
              " of " + quoted_name(s->split().name) + " (the first: " + s->first_skip_reason() + ")";
  }
  return report;
}

}  // namespace trident::data
