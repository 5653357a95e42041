// What a public trident::Network holds: an inference executable, or a Trainer with its training
// and inference executables, and the few facts the API reports. Shared by the files of src/api/
// that implement Network (compiling and inference, training, weights).
#pragma once
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/train_limits.h"
#include "runtime/trainer.h"
#include "trident/network.h"

namespace trident {

struct Network::Impl {
  // Held by every call that runs the network or touches its weights: a Network shared between
  // threads runs one call at a time (recursive: infer() calls infer()).
  mutable std::recursive_mutex mutex;
  Mode mode = Mode::inference;
  std::string model, backend;
  // The model as built or imported, before the compile passes: what exports write and what a
  // PyTorch state dict's layouts are read against; and the file it came from (checkpoints).
  ir::Graph model_graph;
  frontend::ModelInfo info;
  std::string model_path;  // an ONNX model's absolute path
  uint32_t model_crc = 0;
  std::vector<std::string> notices;
  uint64_t seed = 1;
  double learning_rate = 0;
  std::unique_ptr<runtime::Executable> inference;  // Mode::inference
  std::unique_ptr<runtime::Trainer> trainer;       // Mode::training
  bool eval_current = false;  // the trainer's inference executable has the trained weights
  int64_t batches_trained = 0;  // steps taken, by train_step and train: a state dict's num_batches_tracked

  // The executable infer() runs: a training network's inference form, its weights brought up
  // to date first.
  runtime::Executable& inference_executable();
  // The executable whose weights are the network's: what save and load read and write.
  runtime::Executable& weights_executable();
  // An Error naming `what` unless this is a training network.
  runtime::Trainer& require_training(const char* what);
};

namespace api {

// An Error naming `field` (e.g. "CompileOptions::batch") unless `value` is within `limit`, the
// range the command line's flag for it accepts.
void check_limit(const runtime::TrainLimit& limit, double value, const std::string& field);

// Copies a batch of `layout` into `value` of `exe` (its NHWC input) and sends it to the backend;
// a size other than the value's is an Error naming both.
void write_images(runtime::Executable& exe, int value, std::span<const float> images, Layout layout);

}  // namespace api
}  // namespace trident
