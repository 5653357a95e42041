// Training loop over a compiled training executable: feeds batches, drives the learning-rate
// schedule, accumulates loss and accuracy, and evaluates on a separately compiled inference
// executable that receives the trained weights and running statistics by name.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/data/batch_iterator.h"
#include "runtime/data/batch_source.h"
#include "runtime/data/dataset.h"
#include "runtime/executable.h"
#include "runtime/queued_steps.h"

namespace trident::runtime {

struct TrainConfig {
  int64_t epochs = 3;
  double lr = 0.05;             // peak learning rate (after warm-up)
  double warmup_epochs = 0.2;   // linear warm-up from lr/10, then cosine decay to 0
  // A step schedule instead of the cosine (torch's MultiStepLR): after the warm-up the rate is
  // lr·gamma^k, k the number of these epoch counts already completed. Empty: the cosine.
  std::vector<int64_t> lr_step_epochs;
  double lr_gamma = 0.1;
  uint64_t seed = 1;
  // What the passes read, for both executables (the trainer sets each one's mode): backend,
  // precision (f16/bf16: mixed precision on the GPU), the optimizer and its settings (SGD or
  // AdamW), the disabled passes by name (each executable takes those its pipeline has), the
  // IR dump directory (DIR/train, DIR/infer) and the memory budget both executables claim from.
  passes::CompileOptions compile = default_compile_options(passes::Mode::Train);
  // Timing and CUDA graphs, for both executables; evaluation never uses Winograd (trainer.cpp).
  // Its distributed world, where set, makes the run data-parallel: the training plan averages
  // the gradients over the ranks, and the metrics are summed over them (each rank feeds its own
  // shard: data/sharded_batches.h).
  BackendOptions backend_options;
  // On a device, fetch the next batch and copy it there while the step runs (an input lane:
  // backends/input_lane.h); off, each batch is fetched and uploaded between two steps. The
  // parameters after any number of steps are the same either way.
  bool upload_ahead = true;
  // Where an image folder's training and evaluation images are decoded and augmented
  // (`--decode`): on the GPU (nvJPEG and a resampling kernel, through the input lane:
  // backends/image_batch.h) or by the loader's CPU workers. Auto takes the GPU where the lane can decode and says why not
  // otherwise (decode_notice()); gpu makes that an Error.
  enum class Decode { automatic, gpu, cpu };
  Decode decode = Decode::automatic;
  // Images the CPU workers made cross the bus as uint8 pixels where the lane normalises them (a
  // quarter of the bytes; within half a level of 255 of the floats: batch_feed.h). Off, the
  // loader's floats are sent, and training ahead gives the bits of uploading between steps.
  bool send_pixels = true;
};
// "auto", "gpu", "cpu" ↔ TrainConfig::Decode; an Error names `what` for another word.
TrainConfig::Decode parse_decode(const std::string& text, const std::string& what);

// The learning rate at a step: linear warm-up over `warmup` steps from base/10, then cosine
// decay to zero at `total`.
double learning_rate(int64_t step, int64_t total, int64_t warmup, double base);
// The same warm-up, then base·gamma^k, k the number of `milestones` (in steps) already reached.
double step_learning_rate(int64_t step, int64_t warmup, double base, const std::vector<int64_t>& milestones,
                          double gamma);
// "30,60,80" ↔ {30, 60, 80}: epochs, each at least 1 and larger than the one before; an Error
// names `what` otherwise. The empty text is the empty list.
std::vector<int64_t> parse_step_epochs(const std::string& text, const std::string& what);
std::string step_epochs_text(const std::vector<int64_t>& epochs);

struct EpochStats {
  int64_t epoch = 0;
  double loss = 0, accuracy = 0;  // over the epoch's training batches
  double seconds = 0, images_per_second = 0;
  double lr = 0;                  // at the epoch's last step
  double mean_threads = 0;        // host threads per step, averaged (fewer under contention)
  // Of `seconds`, the time the step waited for its batch: the time fetching it took where it is
  // fetched between steps; with upload_ahead on a device, the time from the end of a step to
  // the arrival of the next batch on the device (and the first fetch of the epoch).
  double data_wait_seconds = 0;
  // An image folder's: what decoded and augmented the epoch's images ("the GPU (nvJPEG …)",
  // "the CPU workers (why not the GPU)"); empty for other data.
  std::string decoded_by;
};

struct EvalStats {
  double loss = 0, accuracy = 0;
  double top5_accuracy = 0;  // the label among the five highest logits (all of them below 5 classes)
  int64_t samples = 0;
  double seconds = 0;
};

// Called after every training batch: (batches done, batches total, mean loss, accuracy,
// images/s so far). Return false to stop the epoch early (not used by the CLI).
using BatchCallback = std::function<void(int64_t, int64_t, double, double, double)>;

// --bn-group: checks BackendOptions::batchnorm_group_size against the world and makes this
// rank's group (collective: every rank calls it; the trainer does). Groups are consecutive
// ranks, rank / K, so a group stays on one machine where the launcher fills machines in turn.
void make_batchnorm_group(BackendOptions& options);

class Trainer {
 public:
  // Compiles `model` for training and for inference on `config.compile.backend`, initialises weights.
  Trainer(const ir::Graph& model, TrainConfig config);

  EpochStats train_epoch(data::BatchSource& batches, int64_t epoch, int64_t epochs_total,
                         const BatchCallback& on_batch = {});
  // Every sample once, in order (a source's epoch 0), counting only each batch's real rows.
  EvalStats evaluate(data::BatchSource& batches);
  EvalStats evaluate(const data::Dataset& ds);

  // Replaces every tensor of the training executable (strictly: all present, shapes and dtypes
  // equal) and sets the optimizer step, so the learning-rate schedule continues where a
  // checkpointed run stopped. Validates before changing anything.
  void restore(const WeightMap& weights, int64_t step);
  // The learning-rate schedule of the epochs that follow: its peak, its warm-up in epochs, the
  // step schedule's epochs and factor (none: the cosine) and the step it stands at (0: a new
  // schedule). The compiled executables stay as they are.
  void set_schedule(double lr, double warmup_epochs, int64_t step, std::vector<int64_t> step_epochs = {},
                    double gamma = 0.1);

  // Data parallel without sync-BN: each rank's running statistics are its own shard's. This
  // replaces them on every rank by their mean over the ranks (collective: every rank calls
  // it), as evaluate() does first and the CLI does before a checkpoint is written; a no-op in
  // one process, under sync-BN (the statistics are the same everywhere) and when nothing
  // trained since the last call.
  void average_running_statistics();

  // Where an image folder's training and evaluation images are decoded from the next epoch or
  // evaluation on (TrainConfig::decode).
  void set_image_decoding(TrainConfig::Decode decode) { config_.decode = decode; }

  Executable& train_executable() { return *train_; }
  const Executable& train_executable() const { return *train_; }
  const TrainConfig& config() const { return config_; }
  Executable& eval_executable() { return *eval_; }
  int64_t batch() const { return batch_; }  // this process's
  int world_size() const;
  int64_t global_batch() const { return batch_ * world_size(); }
  int64_t step() const { return step_; }

 private:
  TrainConfig config_;
  std::unique_ptr<Executable> train_, eval_;
  // The training and the evaluation images' (upload_ahead on a device); freed first.
  std::unique_ptr<InputLane> lane_, eval_lane_;
  // The host side of the two training steps in flight; made by the first epoch.
  std::unique_ptr<QueuedSteps> queued_;
  int64_t batch_ = 0, step_ = 0;
  int64_t statistics_averaged_at_ = -1;  // the step average_running_statistics() last ran at
};

// Scores an inference executable (input "images", its logits an output) on every sample of
// `batches` once (their epoch 0), counting only each batch's real rows and of those only the ones
// labelled (a label of -1 is an image the source could not read): top-1, top-5, mean cross-entropy. With a world, each rank scored its own shard and the sums span them all.
// With a lane (`exe`'s input lane on a device), each batch is sent ahead while the one before
// runs, its images decoded where `decode` says and sent as pixels with `send_pixels` (as the
// training loop's: batch_feed.h).
EvalStats evaluate_executable(Executable& exe, data::BatchSource& batches, distributed::World* world = nullptr,
                              InputLane* lane = nullptr, TrainConfig::Decode decode = TrainConfig::Decode::automatic,
                              bool send_pixels = true);

// Fraction of rows of `logits` [rows, classes] whose arg-max equals the label.
int64_t count_correct(const float* logits, const int32_t* labels, int64_t rows, int64_t classes);

}  // namespace trident::runtime
