// A training run's epochs, the one loop `trident train` and Network::train share: each epoch
// trains, then the evaluation split is scored; a loss that blows up stops the run with a sentence
// before anything is saved; after every epoch the metrics line is appended and the checkpoint
// replaced (by rank 0 of a data-parallel job, the running statistics averaged first). What the
// run shows of itself — a progress bar, JSON events, a Python callback — is an observer's.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/train_data.h"
#include "runtime/trainer.h"

namespace trident::runtime {

struct EpochReport {
  int64_t epoch = 0, epochs = 0;  // 1-based, of the run's planned total
  EpochStats train;
  EvalStats eval;        // the evaluation split after this epoch
  std::string split;     // its name: "test", or "val" for an image folder
  std::string skipped;   // the data's report of what it passed over so far ("" when nothing)
  // Images that could not be read so far, both splits, over every rank of a data-parallel job.
  int64_t skipped_images = 0;
};

// What a run tells as it goes; every method does nothing unless overridden.
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void epoch_started(int64_t /*epoch*/, int64_t /*epochs*/, int64_t /*batches*/) {}
  // After every batch: batches done, the epoch's mean loss and accuracy so far, images/s.
  virtual void batch_done(int64_t /*done*/, double /*loss*/, double /*accuracy*/, double /*images_per_second*/) {}
  virtual void epoch_done(const EpochReport& /*report*/) {}
  virtual void checkpoint_saved(const std::string& /*path*/, int64_t /*epoch*/, int64_t /*step*/) {}
};

struct TrainRunOptions {
  int64_t first_epoch = 0;  // epochs already done (a resumed run)
  int64_t epochs = 1;       // the planned total
  int64_t classes = 2;      // the chance loss a diverging run is compared with is ln(classes)
  // After every epoch, on rank 0: the checkpoint (empty: none), described by `checkpoint` (the
  // run's model, data and settings; epoch and step are filled in), and one JSON line of metrics.
  std::string save_path;
  CheckpointInfo checkpoint;
  std::string log_path;
  // How a diverged run's sentence says to lower the learning rate ("--lr", "learning_rate").
  std::string lr_setting = "--lr";
};

// Trains epochs first_epoch + 1 .. epochs; returns the last evaluation (an evaluation of the
// weights as they are when no epoch is left). An Error stops the run: a diverged loss, a file
// that cannot be written.
EvalStats run_epochs(Trainer& trainer, data::TrainData& data, const TrainRunOptions& options, TrainObserver& observer);

// The metrics file's JSON line of one epoch.
std::string metrics_line(const EpochReport& report);

}  // namespace trident::runtime
