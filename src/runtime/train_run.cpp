// The epoch loop of train_run.h. The metrics file is checked before the first epoch and rewritten
// atomically after each (core/atomic_file.h), as the checkpoint is, never after a diverged one.
#include "runtime/train_run.h"

#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "runtime/distributed/world.h"

namespace trident::runtime {

namespace {

bool is_lead(const Trainer& trainer) {
  const distributed::World* world = trainer.config().backend_options.world.get();
  return world == nullptr || world->rank() == 0;
}

// Stops a run whose weights have blown up instead of training on (and saving) them: the mean
// loss of the epoch so far is not finite, or 100 times what guessing uniformly among the
// classes scores. The last checkpoint written (the previous epoch's) stays as it was.
void check_divergence(const TrainRunOptions& o, double lr, double loss, int64_t epoch, int64_t batch,
                      int64_t batches) {
  const double chance = std::log(static_cast<double>(std::max<int64_t>(o.classes, 2)));
  if (std::isfinite(loss) && loss <= 100 * chance) return;
  std::ostringstream os;
  os << "training diverged in epoch " << epoch << " at batch " << batch << " of " << batches << ": the loss is "
     << std::setprecision(3) << loss << " where guessing scores " << std::setprecision(3) << chance << "; lower "
     << o.lr_setting << " (it is " << lr << ")";
  if (!o.save_path.empty() && epoch > 1) os << "; '" << o.save_path << "' keeps epoch " << epoch - 1;
  throw Error(os.str());
}

}  // namespace

std::string metrics_line(const EpochReport& r) {
  return nlohmann::json{{"epoch", r.epoch},
                        {"train_loss", r.train.loss},
                        {"train_accuracy", r.train.accuracy},
                        {"split", r.split},
                        {"eval_loss", r.eval.loss},
                        {"eval_accuracy", r.eval.accuracy},
                        {"eval_top5_accuracy", r.eval.top5_accuracy},
                        {"lr", r.train.lr},
                        {"images_per_second", r.train.images_per_second},
                        {"seconds", r.train.seconds},
                        {"data_wait_seconds", r.train.data_wait_seconds},
                        {"skipped_images", r.skipped_images}}
      .dump();
}

EvalStats run_epochs(Trainer& trainer, data::TrainData& data, const TrainRunOptions& o, TrainObserver& observer) {
  const bool lead = is_lead(trainer);
  // The metrics file is written whole, atomically, after every epoch (core/atomic_file.h: never
  // through a link or into a FIFO); checked now, so a run learns at its start that it cannot.
  const bool logging = !o.log_path.empty() && lead;
  std::string log;
  if (logging) {
    try {
      check_writable(o.log_path);
    } catch (const Error& e) {
      throw Error(std::string("the metrics file: ") + e.what());
    }
  }
  data::BatchSource& batches = *data.train;
  std::optional<EvalStats> last;
  for (int64_t e = o.first_epoch; e < o.epochs; ++e) {
    observer.epoch_started(e + 1, o.epochs, batches.batches_per_epoch());
    EpochReport report;
    report.epoch = e + 1;
    report.epochs = o.epochs;
    report.split = data.eval_split;
    report.train = trainer.train_epoch(batches, e, o.epochs, [&](int64_t done, int64_t, double loss, double acc, double ips) {
      observer.batch_done(done, loss, acc, ips);
      check_divergence(o, trainer.config().lr, loss, e + 1, done, batches.batches_per_epoch());
    });
    report.eval = trainer.evaluate(*data.eval);
    report.skipped = data.skipped_report();
    double skipped = static_cast<double>(data.skipped_images());  // each rank reads its own shard
    if (distributed::World* w = trainer.config().backend_options.world.get()) w->sum(&skipped, 1);
    report.skipped_images = static_cast<int64_t>(skipped);
    last = report.eval;
    observer.epoch_done(report);
    if (logging) {
      log += metrics_line(report) + "\n";
      write_file_atomically(o.log_path, log.data(), log.size());
    }
    if (o.save_path.empty()) continue;
    trainer.average_running_statistics();  // every rank: a collective
    if (!lead) continue;
    CheckpointInfo info = o.checkpoint;
    const CheckpointInfo now = checkpoint_info(trainer);
    info.step = now.step;
    info.batch = now.batch;
    info.config = now.config;
    info.config.epochs = o.epochs;
    info.epoch = e + 1;
    save_checkpoint(o.save_path, trainer, info);
    observer.checkpoint_saved(o.save_path, e + 1, trainer.step());
  }
  return last ? *last : trainer.evaluate(*data.eval);
}

}  // namespace trident::runtime
