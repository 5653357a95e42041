// What a training run trains and evaluates on, behind one pair of batch sources: Fashion-MNIST,
// CIFAR-10 or synthetic data held in memory, or an image folder streamed by worker threads
// (data/image_folder_batches.h). `trident train` and Network::train open their data here. An
// image folder decides a zoo network's input (3 x S x S) and class count, so it is listed before
// the model is built; the in-memory kinds are checked against the model after.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/memory_budget.h"
#include "frontend/zoo.h"
#include "runtime/data/batch_source.h"
#include "runtime/data/dataset.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"

namespace trident::data {

struct TrainDataOptions {
  std::string dir;  // empty: the Debian package's Fashion-MNIST
  bool synthetic = false;
  // Read only this many images of each split (0: all); an image folder's are a seeded sample
  // across its classes (image_folder.h).
  int64_t train_limit = 0, test_limit = 0;
  int image_size = 0;  // image folders: the side of the square crops; 0: the model's own
  int workers = 0;     // image folders: 0 means data::default_image_workers()
  int64_t batch = 64;  // the global batch
  uint64_t seed = 1;   // the shuffles, the crops and the limits' samples
};

// The listing of an image folder's two splits and the square size its images become.
struct ImageFolderInput {
  ImageFolderSplit train, val;
  int image_size = 0;
};

// Lists the image folder `options.dir` names, its images cropped to `options.image_size` or, when
// that is 0, to `model_size` (the model's input side; 0: 224, ImageNet's); nullopt when it is
// another kind of dataset (then image_size is an error: only an image folder's images are resized).
std::optional<ImageFolderInput> find_image_folder(const TrainDataOptions& options, int model_size = 0);

struct TrainData {
  std::string name;        // the training split's, as checkpoints record it
  std::string eval_split;  // "test", or "val" for an image folder
  int64_t train_count = 0, eval_count = 0;
  bool streamed = false;   // an image folder: its val split is evaluated after every epoch
  std::unique_ptr<BatchSource> train, eval;

  // One sentence about what was passed over so far (images that could not be read, files that
  // are no image), or "" when nothing was.
  std::string skipped_report() const;
  int64_t skipped_images() const;  // unreadable images so far, both splits

 private:
  friend TrainData load_data(const TrainDataOptions&, const frontend::ModelInfo&, std::optional<ImageFolderInput>,
                             MemoryBudget&, bool);
  // The in-memory datasets the iterators refer to; heap-held so a moved TrainData keeps them in place.
  std::unique_ptr<Dataset> train_set_, eval_set_;
  ImageFolderBatches* train_stream_ = nullptr;
  ImageFolderBatches* eval_stream_ = nullptr;
  std::string listing_report_;  // the files the listing passed over
};

// Opens the data for a model of shape `info`: the folder's streams (their batch rings claimed
// from `budget`), or the in-memory datasets read as far as the limits ask, each an Error naming
// what does not fit the model.
TrainData load_train_data(const TrainDataOptions& options, const frontend::ModelInfo& info,
                          std::optional<ImageFolderInput> folder, MemoryBudget& budget);
// The same with only the evaluation split read (`train` is null): what an evaluation scores.
TrainData load_eval_data(const TrainDataOptions& options, const frontend::ModelInfo& info,
                         std::optional<ImageFolderInput> folder, MemoryBudget& budget);

}  // namespace trident::data
