// Training checkpoints: a safetensors file whose tensors are everything the training
// executable holds (parameters, BatchNorm running statistics, optimizer state) and whose
// metadata records where training stands and how it was configured, so a run can resume.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/data/train_data.h"
#include "runtime/trainer.h"

namespace trident::runtime {

inline constexpr const char* kCheckpointFormat = "trident-checkpoint-1";

// Where training stands. The RNG state is complete without any generator bytes: weight
// initialisation is a pure function of (seed, tensor name) and the shuffle of an epoch a pure
// function of (seed, epoch) (see data::BatchIterator), and no other randomness exists, so
// (seed, epoch, step) restores every random stream exactly.
struct CheckpointInfo {
  std::string model;          // a zoo name, or an ONNX model's absolute path
  std::string model_crc;      // an ONNX model file's CRC-32C (8 hex digits); "" for a zoo model
  // The model's extents: a zoo model trained on an image folder takes the folder's size and
  // classes, so these rebuild it (0: unknown, a checkpoint from before they were recorded).
  int64_t height = 0, width = 0, channels = 0, classes = 0;
  // Where the run's images came from and how many (the folder's absolute path, "" for the default
  // Fashion-MNIST; synthetic; the limits; an image folder's crop size), and where it saved: what a
  // resumed run takes from here instead of asking again. Its batch and seed are not used.
  data::TrainDataOptions data;
  bool recorded_data = false;  // false for a checkpoint from before runs recorded their data
  std::string save_path;
  int64_t epoch = 0;          // epochs completed
  int64_t step = 0;           // optimizer steps taken (drives the learning-rate schedule)
  int64_t batch = 0;          // a step's global batch: the per-process batch times the ranks
  std::string dataset;        // training set name and size, checked when resuming
  int64_t train_images = 0;
  double loss_scale = 1;      // always 1: training is f32 without loss scaling
  // Seed, backend, hyper-parameters and `epochs`, the planned total that sets the length of
  // the learning-rate schedule (the pass and dump options are not stored).
  TrainConfig config;
};

struct Checkpoint {
  WeightMap weights;
  CheckpointInfo info;
};

// The info of `trainer` now; the caller fills model, epoch, config.epochs and the dataset fields.
CheckpointInfo checkpoint_info(const Trainer& trainer);
// Writes `trainer`'s tensors and `info` to `path` atomically (see write_safetensors).
void save_checkpoint(const std::string& path, const Trainer& trainer, const CheckpointInfo& info);
// Reads and validates a checkpoint; an Error names the file and the missing or bad field.
Checkpoint load_checkpoint(const std::string& path);
// Checks that `ckpt` (read from `path`) belongs to this model and batch size, then loads every
// tensor into the trainer (strictly: each one must be present with its shape and dtype) and
// sets its step counter, so the next epoch is the one an uninterrupted run would train.
void resume_from(Trainer& trainer, const Checkpoint& ckpt, const std::string& path,
                 const std::string& model);

}  // namespace trident::runtime
