// Training and evaluation through trident::Network: one SGD step on a caller's batch at a fixed
// rate, or epochs over a dataset folder through the loop `trident train` runs
// (runtime/train_run.h) on the data it opens (runtime/data/train_data.h) — Fashion-MNIST, CIFAR-10
// or an image folder, evaluated after every epoch — and the scoring of the weights on a test split.
#include <cstring>

#include "api/model_impl.h"
#include "api/network_impl.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "runtime/data/train_data.h"
#include "runtime/train_run.h"

namespace trident {

namespace {

// The network as the data loader sees a model: its input side and class count.
frontend::ModelInfo model_info(const std::string& model, frontend::ModelInfo info, const runtime::Executable& exe) {
  const Shape images = exe.find(api::kImagesInput).shape;  // [N, H, W, C]
  info.name = model;
  if (images.size() == 4) info.height = images[1], info.width = images[2], info.channels = images[3];
  info.classes = exe.view(exe.logits()).shape.back();
  return info;
}

// The data options for `dir`: the network's batch and seed; an image folder's crops the input's side.
data::TrainDataOptions data_options(const std::string& dir, const frontend::ModelInfo& info, int64_t batch,
                                    uint64_t seed, int image_size, int workers, const char* field) {
  if (image_size != 0 && (image_size != info.height || info.height != info.width))
    throw Error(std::string(field) + " is " + std::to_string(image_size) + ", but this network takes " +
                std::to_string(info.height) + "x" + std::to_string(info.width) + " images; leave it 0");
  if (workers < 0 || workers > 256) throw Error("the number of workers must be from 0 (automatic) to 256");
  data::TrainDataOptions d;
  d.dir = dir;
  d.batch = batch;
  d.seed = seed;
  d.workers = workers;
  return d;
}

// Collects the epochs for the result and tells the caller's callback.
class ResultObserver final : public runtime::TrainObserver {
 public:
  ResultObserver(TrainResult& result, const std::function<void(const EpochResult&)>& on_epoch)
      : result_(result), on_epoch_(on_epoch) {}
  void epoch_done(const runtime::EpochReport& r) override {
    EpochResult e;
    e.epoch = r.epoch;
    e.loss = r.train.loss;
    e.accuracy = r.train.accuracy;
    e.seconds = r.train.seconds;
    e.images_per_second = r.train.images_per_second;
    e.learning_rate = r.train.lr;
    e.data_wait_seconds = r.train.data_wait_seconds;
    e.eval_loss = r.eval.loss;
    e.eval_accuracy = r.eval.accuracy;
    e.eval_top5_accuracy = r.eval.top5_accuracy;
    e.eval_images = r.eval.samples;
    e.skipped = r.skipped;
    e.skipped_images = r.skipped_images;
    e.decoded_by = r.train.decoded_by;
    result_.epochs.push_back(e);
    if (on_epoch_) on_epoch_(e);
  }

 private:
  TrainResult& result_;
  const std::function<void(const EpochResult&)>& on_epoch_;
};

}  // namespace

float Network::train_step(std::span<const float> images, std::span<const int32_t> labels, Layout layout) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Executable& exe = impl_->require_training("train_step").train_executable();
  const int labels_id = exe.value_id("labels"), lr_id = exe.value_id("lr");
  TensorView label_view = exe.host_view(labels_id);
  if (labels.size() != static_cast<size_t>(label_view.numel()))
    throw Error("train_step got " + std::to_string(labels.size()) + " labels for a batch of " +
                std::to_string(label_view.numel()) + " images");
  const int64_t classes = exe.view(exe.logits()).shape.back();
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw Error("label " + std::to_string(labels[i]) + " at position " + std::to_string(i) +
                  " is not a class of this network (0 to " + std::to_string(classes - 1) + ")");
  api::write_images(exe, exe.value_id(api::kImagesInput), images, layout);
  std::memcpy(label_view.data, labels.data(), label_view.bytes());
  exe.host_view(lr_id).as<float>()[0] = static_cast<float>(impl_->learning_rate);
  exe.upload(labels_id);
  exe.upload(lr_id);
  exe.run();
  impl_->eval_current = false;
  ++impl_->batches_trained;
  exe.download(exe.loss());
  return exe.host_view(exe.loss()).as<float>()[0];
}

void Network::set_learning_rate(double lr) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  impl_->require_training("set_learning_rate");
  api::check_limit(runtime::kLrLimit, lr, "the learning rate");
  impl_->learning_rate = lr;
}

TrainResult Network::train(const std::string& data_dir, const TrainOptions& options) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Trainer& trainer = impl_->require_training("train");
  api::check_limit(runtime::kEpochsLimit, static_cast<double>(options.epochs), "TrainOptions::epochs");
  api::check_limit(runtime::kWarmupLimit, options.warmup_epochs, "TrainOptions::warmup_epochs");
  api::check_limit(runtime::kLrGammaLimit, options.lr_gamma, "TrainOptions::lr_gamma");
  if (options.train_limit < 0 || options.test_limit < 0)
    throw Error("TrainOptions::train_limit and test_limit count images, so they cannot be negative");
  const runtime::TrainConfig::Decode decode = runtime::parse_decode(options.decode, "TrainOptions::decode");
  // The same rule as --lr-steps: epochs, each at least 1 and larger than the one before.
  const std::vector<int64_t> steps =
      runtime::parse_step_epochs(runtime::step_epochs_text(options.lr_steps), "TrainOptions::lr_steps");
  const frontend::ModelInfo info = model_info(impl_->model, impl_->info, trainer.eval_executable());
  data::TrainDataOptions d = data_options(data_dir, info, trainer.global_batch(), impl_->seed, options.image_size,
                                          options.workers, "TrainOptions::image_size");
  d.train_limit = options.train_limit;
  d.test_limit = options.test_limit;
  MemoryBudget budget = MemoryBudget::for_run("", "train with a smaller batch or fewer workers");
  std::optional<data::ImageFolderInput> folder = data::find_image_folder(d, static_cast<int>(info.height));
  data::TrainData data = data::load_train_data(d, info, std::move(folder), budget);

  trainer.set_image_decoding(decode);
  trainer.set_schedule(impl_->learning_rate, options.warmup_epochs, 0, steps, options.lr_gamma);
  runtime::TrainRunOptions run;
  run.epochs = options.epochs;
  run.classes = info.classes;
  run.save_path = options.save_path;
  run.log_path = options.log_path;
  run.lr_setting = "the learning rate";
  runtime::CheckpointInfo& ck = run.checkpoint;
  ck.model = impl_->model_path.empty() ? impl_->model : impl_->model_path;
  if (!impl_->model_path.empty()) {
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", impl_->model_crc);
    ck.model_crc = crc;
  }
  ck.height = info.height, ck.width = info.width, ck.channels = info.channels, ck.classes = info.classes;
  ck.dataset = data.name;
  ck.train_images = data.train_count;
  ck.data = d;
  ck.data.image_size = data.streamed ? static_cast<int>(info.height) : 0;
  ck.save_path = options.save_path;
  TrainResult result;
  ResultObserver observer(result, options.on_epoch);
  impl_->eval_current = false;
  const runtime::EvalStats ev = runtime::run_epochs(trainer, data, run, observer);
  impl_->eval_current = true;  // evaluation copied the trained weights over
  impl_->batches_trained += trainer.step();  // the schedule, and so the count, started at 0
  result.eval_split = data.eval_split;
  result.test_loss = ev.loss;
  result.test_accuracy = ev.accuracy;
  result.test_top5_accuracy = ev.top5_accuracy;
  result.test_images = ev.samples;
  return result;
}

EvalResult Network::evaluate(const std::string& data_dir, const EvalOptions& options) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Executable& exe = impl_->inference_executable();
  if (options.limit < 0) throw Error("EvalOptions::limit counts images, so it cannot be negative");
  const frontend::ModelInfo info = model_info(impl_->model, impl_->info, exe);
  data::TrainDataOptions d = data_options(data_dir, info, exe.find(api::kImagesInput).shape[0], impl_->seed,
                                          options.image_size, options.workers, "EvalOptions::image_size");
  d.test_limit = options.limit;
  MemoryBudget budget = MemoryBudget::for_run("", "evaluate with a smaller batch or fewer workers");
  // An image folder's training split is listed (its classes are the labels), not read.
  std::optional<data::ImageFolderInput> folder = data::find_image_folder(d, static_cast<int>(info.height));
  data::TrainData data = data::load_eval_data(d, info, std::move(folder), budget);
  const runtime::EvalStats ev = runtime::evaluate_executable(exe, *data.eval);
  return {data.eval_split, ev.loss, ev.accuracy, ev.top5_accuracy, ev.samples, ev.seconds};
}

}  // namespace trident
