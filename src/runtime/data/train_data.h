// What `trident train` trains and evaluates on, behind one pair of batch sources: Fashion-MNIST,
// CIFAR-10 or synthetic data held in memory, or an image folder streamed by worker threads
// (data/image_folder_batches.h). An image folder decides the network's input (3 x S x S) and
// class count, so it is listed before the model is built; the in-memory kinds are checked
// against the model after.
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

namespace trident::cli {

struct TrainDataFlags {
  std::string dir;  // empty: the Debian package's Fashion-MNIST
  bool synthetic = false;
  int64_t train_limit = 0, test_limit = 0;
  int image_size = 0;  // image folders: 0 means 224
  int workers = 0;     // image folders: 0 means data::default_image_workers()
  int64_t batch = 64;
  uint64_t seed = 1;
};

// The listing of an image folder's two splits and the square size its images become.
struct ImageFolderInput {
  data::ImageFolderSplit train, val;
  int image_size = 0;
};

// Lists the image folder --data names, or nullopt when it is another kind of dataset (then
// --image-size is an error: only an image folder's images are resized).
std::optional<ImageFolderInput> find_image_folder(const TrainDataFlags& flags);

struct TrainData {
  std::string name;        // the training split's, as checkpoints record it
  std::string eval_split;  // "test", or "val" for an image folder
  int64_t train_count = 0, eval_count = 0;
  bool streamed = false;   // an image folder: its val split is evaluated after every epoch
  std::unique_ptr<data::BatchSource> train, eval;

  // For streamed data, one sentence about the images skipped so far as unreadable (empty when
  // none were).
  std::string skipped_report() const;

 private:
  friend TrainData load_train_data(const TrainDataFlags&, const frontend::ModelInfo&, std::optional<ImageFolderInput>,
                                   MemoryBudget&);
  // The in-memory datasets the iterators refer to; heap-held so a moved TrainData keeps them in place.
  std::unique_ptr<data::Dataset> train_set_, eval_set_;
  data::ImageFolderBatches* train_stream_ = nullptr;
  data::ImageFolderBatches* eval_stream_ = nullptr;
};

// Opens the data for a model of shape `info`: the folder's streams (their batch rings claimed
// from `budget`), or the in-memory datasets read as far as the limits ask, each an Error naming
// what does not fit the model.
TrainData load_train_data(const TrainDataFlags& flags, const frontend::ModelInfo& info,
                          std::optional<ImageFolderInput> folder, MemoryBudget& budget);

}  // namespace trident::cli
