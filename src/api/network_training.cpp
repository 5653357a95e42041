// Training through trident::Network: one SGD step on a caller's batch at a fixed rate, or
// epochs over a dataset folder on the Trainer the CLI uses (warm-up and cosine schedule,
// shuffling from the seed), ending with its evaluation on the test split.
#include <cstring>

#include "api/model_impl.h"
#include "api/network_impl.h"
#include "core/error.h"
#include "runtime/data/batch_iterator.h"
#include "runtime/data/dataset.h"

namespace trident {

float Network::train_step(std::span<const float> images, std::span<const int32_t> labels, Layout layout) {
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
  exe.download(exe.loss());
  return exe.host_view(exe.loss()).as<float>()[0];
}

void Network::set_learning_rate(double lr) {
  impl_->require_training("set_learning_rate");
  api::check_limit(runtime::kLrLimit, lr, "the learning rate");
  impl_->learning_rate = lr;
}

TrainResult Network::train(const std::string& data_dir, const TrainOptions& options) {
  runtime::Trainer& trainer = impl_->require_training("train");
  api::check_limit(runtime::kEpochsLimit, static_cast<double>(options.epochs), "TrainOptions::epochs");
  api::check_limit(runtime::kWarmupLimit, options.warmup_epochs, "TrainOptions::warmup_epochs");
  if (options.train_limit < 0 || options.test_limit < 0)
    throw Error("TrainOptions::train_limit and test_limit count images, so they cannot be negative");
  const data::Dataset train = data::load_image_dataset(data_dir, "train", {options.train_limit, nullptr, "set TrainOptions::train_limit"});
  const data::Dataset test = data::load_image_dataset(data_dir, "test", {options.test_limit, nullptr, "set TrainOptions::test_limit"});
  const Shape images = trainer.train_executable().find(api::kImagesInput).shape;  // [N, H, W, C]
  const int64_t classes = trainer.train_executable().view(trainer.train_executable().logits()).shape.back();
  if (images.size() != 4 || train.height != images[1] || train.width != images[2] || train.channels != images[3] ||
      train.num_classes != classes)
    throw Error("'" + data_dir + "' holds " + train.name + " (" + std::to_string(train.height) + "x" +
                std::to_string(train.width) + "x" + std::to_string(train.channels) + " images in " +
                std::to_string(train.num_classes) + " classes), which does not fit this network's input " +
                shape_str(images) + " (NHWC) and " + std::to_string(classes) + " classes");
  if (trainer.batch() > train.count)
    throw Error("the batch of " + std::to_string(trainer.batch()) + " is larger than the " +
                std::to_string(train.count) + " training images of '" + data_dir + "'");

  trainer.set_schedule(impl_->learning_rate, options.warmup_epochs, 0);
  data::BatchIterator batches(train, trainer.batch(), true, impl_->seed, true);
  TrainResult result;
  for (int64_t e = 0; e < options.epochs; ++e) {
    const runtime::EpochStats st = trainer.train_epoch(batches, e, options.epochs);
    impl_->eval_current = false;
    result.epochs.push_back({e + 1, st.loss, st.accuracy, st.seconds});
  }
  const runtime::EvalStats ev = trainer.evaluate(test);  // copies the trained weights over
  impl_->eval_current = true;
  result.test_loss = ev.loss;
  result.test_accuracy = ev.accuracy;
  result.test_images = ev.samples;
  return result;
}

}  // namespace trident
