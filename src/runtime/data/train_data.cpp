// The data of `trident train` (see train_data.h): only what the limits ask for is read, and its
// memory claimed from the budget first; an image folder holds only its batch rings.
#include "train_data.h"

#include "core/error.h"
#include "core/printable.h"
#include "runtime/data/batch_iterator.h"

namespace trident::cli {

namespace {

constexpr int kDefaultImageSize = 224;

std::string shape_sentence(int64_t h, int64_t w, int64_t c, int64_t classes) {
  return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " images in " +
         std::to_string(classes) + " classes";
}

// The synthetic images (one draw split in two, so the test images share the training classes'
// templates) or the dataset in --data, checked against the model's shape.
void load_in_memory(const TrainDataFlags& f, const frontend::ModelInfo& info, data::Dataset& train,
                    data::Dataset& test, MemoryBudget& budget) {
  if (f.synthetic) {
    const int64_t n_train = f.train_limit ? f.train_limit : 4096, n_test = f.test_limit ? f.test_limit : 1024;
    const uint64_t bytes = static_cast<uint64_t>(n_train + n_test) *
                           (static_cast<uint64_t>(info.height) * info.width * info.channels + 1) * 4;
    budget.claim(bytes, "the synthetic images", "lower --train-limit or --test-limit");
    budget.check(bytes, "splitting the synthetic images", "lower --train-limit or --test-limit");
    data::Dataset all = data::make_synthetic(n_train + n_test, info.height, info.width, info.channels,
                                             info.classes, f.seed);
    train = data::subset(all, 0, n_train);
    test = data::subset(all, n_train, n_test);
    return;
  }
  const std::string dir = f.dir.empty() ? data::default_fashion_mnist_dir() : f.dir;
  train = data::load_image_dataset(dir, "train", {f.train_limit, &budget, "use --train-limit"});
  test = data::load_image_dataset(dir, "test", {f.test_limit, &budget, "use --test-limit"});
  if (train.height != info.height || train.width != info.width || train.channels != info.channels ||
      train.num_classes != info.classes)
    throw Error("model '" + info.name + "' expects " + shape_sentence(info.height, info.width, info.channels, info.classes) +
                ", but " + train.name + " has " + std::to_string(train.height) + "x" + std::to_string(train.width) +
                "x" + std::to_string(train.channels) + " in " + std::to_string(train.num_classes) +
                "; use --synthetic, or --data with a dataset of that shape");
}

}  // namespace

std::optional<ImageFolderInput> find_image_folder(const TrainDataFlags& f) {
  if (f.synthetic || f.dir.empty() || !data::is_image_folder_dir(f.dir)) {
    if (f.image_size != 0)
      throw Error("--image-size applies to image folders (DIR/train/<class>/, DIR/val/<class>/) only, and " +
                  std::string(f.synthetic ? "--synthetic data" : "this --data") + " is none");
    return std::nullopt;
  }
  ImageFolderInput in;
  in.image_size = f.image_size != 0 ? f.image_size : kDefaultImageSize;
  in.train = data::scan_image_folder(f.dir, "train", f.train_limit);
  in.val = data::scan_image_folder(f.dir, "val", f.test_limit, &in.train.classes);
  return in;
}

TrainData load_train_data(const TrainDataFlags& f, const frontend::ModelInfo& info,
                          std::optional<ImageFolderInput> folder, MemoryBudget& budget) {
  TrainData d;
  if (!folder) {
    d.train_set_ = std::make_unique<data::Dataset>();
    d.eval_set_ = std::make_unique<data::Dataset>();
    load_in_memory(f, info, *d.train_set_, *d.eval_set_, budget);
    if (f.batch > d.train_set_->count)
      throw Error("--batch " + std::to_string(f.batch) + " is larger than the " +
                  std::to_string(d.train_set_->count) + " training images");
    d.name = d.train_set_->name;
    d.eval_split = "test";
    d.train_count = d.train_set_->count;
    d.eval_count = d.eval_set_->count;
    d.train = std::make_unique<data::BatchIterator>(*d.train_set_, f.batch, true, f.seed, true);
    d.eval = std::make_unique<data::BatchIterator>(*d.eval_set_, f.batch, false, 0, false);
    return d;
  }
  const int64_t s = folder->image_size, classes = static_cast<int64_t>(folder->train.classes.size());
  if (info.height != s || info.width != s || info.channels != 3 || info.classes != classes)
    throw Error("model '" + info.name + "' takes " + shape_sentence(info.height, info.width, info.channels, info.classes) +
                ", but the image folder " + quoted_name(f.dir) + " gives " + shape_sentence(s, s, 3, classes) +
                " (--image-size " + std::to_string(s) + ")");
  if (f.batch > folder->train.count())
    throw Error("--batch " + std::to_string(f.batch) + " is larger than the " +
                std::to_string(folder->train.count()) + " training images");
  data::ImageStreamOptions o;
  o.image_size = folder->image_size;
  o.batch = f.batch;
  o.seed = f.seed;
  o.workers = f.workers != 0 ? f.workers : data::default_image_workers();
  d.name = folder->train.name;
  d.eval_split = "val";
  d.train_count = folder->train.count();
  d.eval_count = folder->val.count();
  d.streamed = true;
  budget.claim(2 * data::image_ring_bytes(o), "the image batches decoded ahead", "lower --batch or --image-size");
  o.train = true;
  auto train = std::make_unique<data::ImageFolderBatches>(std::move(folder->train), o);
  o.train = false;
  auto eval = std::make_unique<data::ImageFolderBatches>(std::move(folder->val), o);
  d.train_stream_ = train.get();
  d.eval_stream_ = eval.get();
  d.train = std::move(train);
  d.eval = std::move(eval);
  return d;
}

std::string TrainData::skipped_report() const {
  std::string report;
  for (const data::ImageFolderBatches* s : {train_stream_, eval_stream_}) {
    if (s == nullptr || s->skipped() == 0) continue;
    if (!report.empty()) report += "; ";
    report += "skipped " + std::to_string(s->skipped()) + " unreadable image" + (s->skipped() == 1 ? "" : "s") +
              " of " + quoted_name(s->split().name) + " (the first: " + s->first_skip_reason() + ")";
  }
  return report;
}

}  // namespace trident::cli
