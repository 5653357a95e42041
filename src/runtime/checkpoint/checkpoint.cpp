// Checkpoint metadata: every number is stored as text in the safetensors "__metadata__" map
// (the format allows strings only), doubles in their shortest round-trip form so a resumed
// run uses bit-identical hyper-parameters.
#include "runtime/checkpoint/checkpoint.h"

#include <charconv>
#include <cstdint>
#include <system_error>

#include "core/error.h"
#include "core/printable.h"
#include "runtime/train_limits.h"

namespace trident::runtime {

namespace {

std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

class Reader {
 public:
  Reader(const Metadata& md, const std::string& path) : md_(md), path_(path) {}
  bool has(const std::string& key) const { return md_.count(key) != 0; }
  const std::string& text(const std::string& key) const {
    auto it = md_.find(key);
    if (it == md_.end()) throw Error("checkpoint '" + path_ + "' lacks the metadata entry '" + key + "'");
    return it->second;
  }
  template <typename T>
  T num(const std::string& key) const {
    const std::string& s = text(key);
    T v{};
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      throw Error("checkpoint '" + path_ + "' has metadata '" + key + "' = " + quoted_name(s) + ", which is not a number");
    return v;
  }
  // A number within `limit`, the range its command-line flag accepts.
  template <typename T>
  T limited(const TrainLimit& limit) const {
    const T v = num<T>(limit.key);
    if (!limit.allows(static_cast<double>(v)))
      throw Error("checkpoint '" + path_ + "' has metadata '" + limit.key + "' = " + quoted_name(text(limit.key)) +
                  ", but it must be " + limit.range() + " (as " + limit.flag + " must)");
    return v;
  }
  int64_t count(const std::string& key) const {
    const int64_t v = num<int64_t>(key);
    if (v < 0) throw Error("checkpoint '" + path_ + "' has a negative '" + key + "'");
    return v;
  }

 private:
  const Metadata& md_;
  const std::string& path_;
};

}  // namespace

CheckpointInfo checkpoint_info(const Trainer& trainer) {
  CheckpointInfo info;
  info.step = trainer.step();
  info.batch = trainer.global_batch();  // the steps' batch, whatever the world size
  info.config = trainer.config();
  return info;
}

void save_checkpoint(const std::string& path, const Trainer& trainer, const CheckpointInfo& info) {
  const TrainConfig& c = info.config;
  const Metadata md{
      {"format", kCheckpointFormat},
      {"model", info.model},
      {"epoch", std::to_string(info.epoch)},
      {"epochs", std::to_string(c.epochs)},
      {"step", std::to_string(info.step)},
      {"batch", std::to_string(info.batch)},
      {"dataset", info.dataset},
      {"train_images", std::to_string(info.train_images)},
      {"loss_scale", number(info.loss_scale)},
      {"seed", std::to_string(c.seed)},
      {"backend", c.compile.backend},
      {"lr", number(c.lr)},
      {"momentum", number(c.compile.momentum)},
      {"weight_decay", number(c.compile.weight_decay)},
      {"nesterov", c.compile.nesterov ? "1" : "0"},
      {"optimizer", std::string(passes::optimizer_kind_name(c.compile.optimizer_kind))},
      {"beta1", number(c.compile.beta1)},
      {"beta2", number(c.compile.beta2)},
      {"eps", number(c.compile.adam_eps)},
      {"warmup_epochs", number(c.warmup_epochs)},
      {"label_smoothing", number(c.compile.label_smoothing)},
      {"lr_steps", step_epochs_text(c.lr_step_epochs)},
      {"lr_gamma", number(c.lr_gamma)},
      {"sync_bn", c.backend_options.sync_batchnorm ? "1" : "0"},
      {"bn_group", std::to_string(c.backend_options.batchnorm_group_size)},
      {"model_crc32c", info.model_crc},
      {"height", std::to_string(info.height)},
      {"width", std::to_string(info.width)},
      {"channels", std::to_string(info.channels)},
      {"classes", std::to_string(info.classes)},
      {"data_dir", info.data.dir},
      {"synthetic", info.data.synthetic ? "1" : "0"},
      {"train_limit", std::to_string(info.data.train_limit)},
      {"test_limit", std::to_string(info.data.test_limit)},
      {"image_size", std::to_string(info.data.image_size)},
      {"save", info.save_path},
  };
  write_safetensors(path, trainer.train_executable().export_weights(), md);
}

Checkpoint load_checkpoint(const std::string& path) {
  Checkpoint ck;
  Metadata md;
  ck.weights = read_safetensors(path, &md);
  auto fmt = md.find("format");
  if (fmt == md.end() || fmt->second != kCheckpointFormat)
    throw Error("'" + path + "' is a safetensors file but not a trident checkpoint (its metadata 'format' is " +
                (fmt == md.end() ? std::string("missing") : quoted_name(fmt->second)) +
                ", expected '" + kCheckpointFormat + "')");
  const Reader r(md, path);
  CheckpointInfo& i = ck.info;
  // Names from the file are kept printable (core/printable.h): later messages quote them.
  i.model = printable(r.text("model"));
  i.epoch = r.count("epoch");
  i.config.epochs = r.limited<int64_t>(kEpochsLimit);
  if (i.epoch > i.config.epochs)
    throw Error("checkpoint '" + path + "' has metadata 'epoch' = " + quoted_name(r.text("epoch")) +
                ", but it must be from 0 to its 'epochs' (" + r.text("epochs") + ")");
  i.batch = r.limited<int64_t>(kBatchLimit);
  i.dataset = printable(r.text("dataset"));
  i.train_images = r.count("train_images");
  // Every epoch takes train_images / batch steps (the last partial batch is dropped).
  i.step = r.count("step");
  const int64_t per_epoch = i.train_images / i.batch;
  if (i.epoch > 0 ? per_epoch > INT64_MAX / i.epoch || i.step != i.epoch * per_epoch : i.step != 0)
    throw Error("checkpoint '" + path + "' has metadata 'step' = " + quoted_name(r.text("step")) +
                ", but it must be 'epoch' times 'train_images' / 'batch' (" + std::to_string(i.epoch) + " x " +
                std::to_string(i.train_images) + " / " + std::to_string(i.batch) + ")");
  i.loss_scale = r.num<double>("loss_scale");
  i.config.seed = r.num<uint64_t>("seed");
  i.config.compile.backend = printable(r.text("backend"));
  i.config.lr = r.limited<double>(kLrLimit);
  i.config.compile.momentum = r.limited<double>(kMomentumLimit);
  i.config.compile.weight_decay = r.limited<double>(kWeightDecayLimit);
  i.config.compile.nesterov = r.num<int>("nesterov") != 0;
  i.config.warmup_epochs = r.limited<double>(kWarmupLimit);
  // Checkpoints written before AdamW existed trained with SGD.
  if (r.has("optimizer")) {
    try {
      i.config.compile.optimizer_kind = passes::parse_optimizer_kind(r.text("optimizer"));
    } catch (const Error&) {
      throw Error("checkpoint '" + path + "' has metadata 'optimizer' = " + quoted_name(r.text("optimizer")) +
                  ", but it must be sgd or adamw");
    }
    i.config.compile.beta1 = r.limited<double>(kBeta1Limit);
    i.config.compile.beta2 = r.limited<double>(kBeta2Limit);
    i.config.compile.adam_eps = r.limited<double>(kAdamEpsLimit);
  }
  // Checkpoints written before label smoothing existed trained without it.
  if (r.has(kLabelSmoothingLimit.key)) i.config.compile.label_smoothing = r.limited<double>(kLabelSmoothingLimit);
  if (r.has(kLrGammaLimit.key)) i.config.lr_gamma = r.limited<double>(kLrGammaLimit);
  // Checkpoints written before sync-BN existed trained without it.
  if (r.has("sync_bn")) i.config.backend_options.sync_batchnorm = r.num<int>("sync_bn") != 0;
  if (r.has("bn_group")) {
    const int k = r.num<int>("bn_group");
    if (k < 0 || k > (1 << 20))
      throw Error("checkpoint '" + path + "' has metadata 'bn_group' = " + std::to_string(k) +
                  ", but it must be 0 (sync-BN over every process) or a number of processes");
    i.config.backend_options.batchnorm_group_size = k;
  }
  if (r.has("lr_steps")) i.config.lr_step_epochs = parse_step_epochs(r.text("lr_steps"), "checkpoint '" + path + "' metadata 'lr_steps'");
  // Checkpoints written before runs recorded their model file, extents, data and --save.
  if (r.has("model_crc32c")) {
    i.model_crc = printable(r.text("model_crc32c"));
    if (!i.model_crc.empty() && (i.model_crc.size() != 8 || i.model_crc.find_first_not_of("0123456789abcdef") != std::string::npos))
      throw Error("checkpoint '" + path + "' has metadata 'model_crc32c' = " + quoted_name(i.model_crc) +
                  ", which is not 8 hex digits");
  }
  for (auto [key, extent] : {std::pair<const char*, int64_t*>{"height", &i.height}, {"width", &i.width},
                             {"channels", &i.channels}, {"classes", &i.classes}})
    if (r.has(key) && (*extent = r.count(key)) > (int64_t{1} << 24))
      throw Error("checkpoint '" + path + "' has metadata '" + key + "' = " + r.text(key) + ", which is absurdly large");
  i.recorded_data = r.has("data_dir");
  if (r.has("data_dir")) i.data.dir = printable(r.text("data_dir"));
  if (r.has("synthetic")) i.data.synthetic = r.num<int>("synthetic") != 0;
  if (r.has("train_limit")) i.data.train_limit = r.count("train_limit");
  if (r.has("test_limit")) i.data.test_limit = r.count("test_limit");
  if (r.has("image_size")) {
    const int64_t s = r.count("image_size");
    if (s != 0 && (s < 8 || s > 4096))
      throw Error("checkpoint '" + path + "' has metadata 'image_size' = " + r.text("image_size") +
                  ", but it must be 0 or from 8 to 4096 (as --image-size must)");
    i.data.image_size = static_cast<int>(s);
  }
  if (r.has("save")) i.save_path = printable(r.text("save"));
  if (i.loss_scale != 1)
    throw Error("checkpoint '" + path + "' has loss scale " + quoted_name(r.text("loss_scale")) +
                "; this version of trident trains without loss scaling and cannot resume it");
  return ck;
}

void resume_from(Trainer& trainer, const Checkpoint& ckpt, const std::string& path,
                 const std::string& model) {
  const CheckpointInfo& i = ckpt.info;
  if (i.model != model)
    throw Error("checkpoint '" + path + "' is of model '" + i.model + "', not '" + model + "'");
  if (i.batch != trainer.global_batch())
    throw Error("checkpoint '" + path + "' was trained with (global) batch " + std::to_string(i.batch) +
                ", not " + std::to_string(trainer.global_batch()) + "; resume with the same batch over all processes");
  try {
    trainer.restore(ckpt.weights, i.step);
  } catch (const Error& e) {
    throw Error("checkpoint '" + path + "' does not fit the network: " + e.what());
  }
}

}  // namespace trident::runtime
