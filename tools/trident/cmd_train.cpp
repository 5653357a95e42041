// `trident train`: trains a zoo model or an ONNX model on Fashion-MNIST, CIFAR-10, an image
// folder (runtime/data/train_data.h) or synthetic data of the model's shape, through the epoch
// loop the library shares (runtime/train_run.h), with a progress bar per epoch on stderr and,
// with --json, one JSON line per event on stdout. Ends with the test accuracy, on stdout; a run
// whose loss blows up stops with a sentence and exit 1. --save writes a checkpoint after every
// epoch, --resume continues one exactly (its model, data and settings from the checkpoint),
// --weights starts a fresh run from saved tensors (--skip-mismatched: those that fit).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/path_lock.h"
#include "frontend/model_source.h"
#include "frontend/zoo.h"
#include "runtime/default_batch.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/data/sharded_batches.h"
#include "runtime/data/train_data.h"
#include "runtime/progress.h"
#include "runtime/train_run.h"
#include "runtime/trainer.h"
#include "rank.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = frontend::default_model();
  int64_t epochs = 3;
  int64_t batch = runtime::kDefaultTrainBatch;
  runtime::TrainConfig config;
  data::TrainDataOptions data;  // its batch and seed are set from the two above when the data is opened
  ThreadFlags threads;
  bool json = false;
  DeviceFlags device;
  std::string save_path, resume_path, weights_path, log_path;
  bool skip_mismatched = false;  // --skip-mismatched: --weights loads what fits (fine-tuning)
  std::string lr_steps;  // --lr-steps as given; parsed into config.lr_step_epochs
  std::string decode = "auto";  // --decode; parsed into config.decode
  std::string optimizer = "sgd";  // --optimizer as given; parsed into config.compile.optimizer_kind
  std::string max_memory;
  bool sync_bn = false;  // --sync-bn: batchnorm statistics over the global batch
  int bn_group = 0;      // --bn-group: ... or over groups of this many processes
  // The data-parallel job this process is one rank of (under mpirun), else null.
  std::shared_ptr<distributed::World> world;
  CLI::App* app = nullptr;  // to tell flags given on the command line from defaults
};

bool given(const Options& o, const char* flag) { return o.app && o.app->count(flag) > 0; }

// A path as the checkpoint records it: absolute, so a run resumed from another folder finds it.
std::string absolute_path(const std::string& p) {
  if (p.empty()) return p;
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

// A resumed run takes its settings from the checkpoint, so it retraces the interrupted run. A
// flag given explicitly must agree; --epochs may change (it stretches the schedule's tail).
void adopt_checkpoint(Options& o, const runtime::Checkpoint& ck) {
  const runtime::CheckpointInfo& i = ck.info;
  auto adopt = [&](const char* flag, auto& mine, const auto& theirs) {
    if (given(o, flag) && mine != theirs) {
      std::ostringstream os;
      os << flag << " differs from the checkpoint '" << o.resume_path << "' (which has " << theirs
         << "); a resumed run keeps the checkpoint's settings, so drop the flag or start a new run with --weights";
      throw Error(os.str());
    }
    mine = theirs;
  };
  // An ONNX model is recorded by its absolute path: the same file given another way agrees.
  std::string model = o.model;
  const bool onnx = frontend::is_onnx_path(i.model);
  if (given(o, "--model") && frontend::is_onnx_path(model)) model = absolute_path(model);
  adopt("--model", model, onnx ? absolute_path(i.model) : i.model);
  o.model = model;
  // The checkpoint has the global batch; --batch is each process's share of it.
  const int ranks = o.world ? o.world->size() : 1;
  if (i.batch % ranks != 0)
    throw Error("checkpoint '" + o.resume_path + "' has a global batch of " + std::to_string(i.batch) +
                ", which does not split over " + std::to_string(ranks) + " processes; resume with a number of "
                "processes that divides it");
  adopt("--batch", o.batch, i.batch / ranks);
  adopt("--seed", o.config.seed, i.config.seed);
  adopt("--lr", o.config.lr, i.config.lr);
  adopt("--momentum", o.config.compile.momentum, i.config.compile.momentum);
  adopt("--weight-decay", o.config.compile.weight_decay, i.config.compile.weight_decay);
  adopt("--nesterov", o.config.compile.nesterov, i.config.compile.nesterov);
  adopt("--optimizer", o.optimizer, std::string(passes::optimizer_kind_name(i.config.compile.optimizer_kind)));
  o.config.compile.optimizer_kind = i.config.compile.optimizer_kind;
  adopt("--beta1", o.config.compile.beta1, i.config.compile.beta1);
  adopt("--beta2", o.config.compile.beta2, i.config.compile.beta2);
  adopt("--eps", o.config.compile.adam_eps, i.config.compile.adam_eps);
  adopt("--warmup", o.config.warmup_epochs, i.config.warmup_epochs);
  adopt("--label-smoothing", o.config.compile.label_smoothing, i.config.compile.label_smoothing);
  adopt("--lr-gamma", o.config.lr_gamma, i.config.lr_gamma);
  adopt("--sync-bn", o.sync_bn, i.config.backend_options.sync_batchnorm);
  adopt("--bn-group", o.bn_group, i.config.backend_options.batchnorm_group_size);
  std::string theirs = runtime::step_epochs_text(i.config.lr_step_epochs);
  adopt("--lr-steps", o.lr_steps, theirs);
  o.config.lr_step_epochs = i.config.lr_step_epochs;
  // The data as the run read it: its folder (by absolute path), its kind, the limits, the crop
  // (a checkpoint from before runs recorded them asks for them again, and checks the data's name).
  if (i.recorded_data) {
    std::string dir = given(o, "--data") ? absolute_path(o.data.dir) : o.data.dir;
    adopt("--data", dir, i.data.dir);
    o.data.dir = dir;
    adopt("--synthetic", o.data.synthetic, i.data.synthetic);
    adopt("--train-limit", o.data.train_limit, i.data.train_limit);
    adopt("--test-limit", o.data.test_limit, i.data.test_limit);
    adopt("--image-size", o.data.image_size, i.data.image_size);
  }
  if (!given(o, "--epochs")) o.epochs = i.config.epochs;
  if (!given(o, "--device") && !given(o, "--backend")) o.device.device = i.config.compile.backend;
  // It goes on saving where it saved: the checkpoint it resumes from.
  if (!given(o, "--save")) o.save_path = o.resume_path;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// The model's own input side, which an image folder's crops take by default: an ONNX model's
// (imported at batch 1), or a zoo model's default extent.
int model_side(const std::string& model) {
  if (frontend::is_onnx_path(model)) {
    const frontend::LoadedModel m = frontend::load_model(model, {1}, false);
    return m.info.height == m.info.width ? static_cast<int>(m.info.height) : 0;
  }
  for (const frontend::ModelInfo& z : frontend::model_list())
    if (z.name == model && z.height == z.width) return static_cast<int>(z.height);
  return 0;
}

// The network to train: a zoo model (an image folder gives it its input, 3 x S x S, and class
// count) or an ONNX file (exported from PyTorch) whose initializers are its initial weights and
// whose input and output give its image shape and class count.
frontend::LoadedModel load_model(const Options& o, const std::optional<data::ImageFolderInput>& folder,
                                 MemoryBudget& budget) {
  frontend::ModelConfig cfg{o.batch};
  if (folder && !frontend::is_onnx_path(o.model)) {
    cfg.height = cfg.width = folder->image_size;
    cfg.channels = 3;
    cfg.classes = static_cast<int64_t>(folder->train.classes.size());
  }
  frontend::LoadedModel m = frontend::load_model(o.model, cfg, true, &budget);
  for (const std::string& notice : m.notices) lead_stream(o.world.get(), std::cerr) << "trident: notice: " << notice << "\n";
  return m;
}

// A resumed ONNX model must be the file the run trained: its content, not only its name.
void check_model_file(const Options& o, const frontend::LoadedModel& m, const runtime::CheckpointInfo& i) {
  if (i.model_crc.empty() || m.path.empty()) return;
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", m.file_crc);
  if (i.model_crc != crc)
    throw Error("the model file '" + m.path + "' changed since checkpoint '" + o.resume_path +
                "' was written (its CRC-32C is " + crc + ", the run's was " + i.model_crc +
                "); resume with the file the run trained");
}

// "test accuracy 91.52% on 10000 images (loss 0.2410, 5120 img/s)", with its line end.
std::string eval_sentence(const std::string& split, const runtime::EvalStats& ev) {
  return split + " accuracy " + fixed(100 * ev.accuracy, 2) + "% (top-5 " + fixed(100 * ev.top5_accuracy, 2) + "%) on " +
         std::to_string(ev.samples) + " images (loss " + fixed(ev.loss, 4) + ", " + fixed(ev.samples / ev.seconds, 0) +
         " img/s)\n";
}

// Each rank reads its own slice of every global batch (data/sharded_batches.h).
void shard(data::TrainData& data, const distributed::World& world, const frontend::ModelInfo& info) {
  const int64_t row = info.height * info.width * info.channels;
  data.train = std::make_unique<data::ShardedBatches>(std::move(data.train), world.rank(), world.size(), row);
  data.eval = std::make_unique<data::ShardedBatches>(std::move(data.eval), world.rank(), world.size(), row);
}

// What `trident train` shows of a run: a progress bar per epoch and the epoch's lines on stderr,
// and with --json one JSON object per event on stdout (rank 0 only).
class CommandLineReport final : public runtime::TrainObserver {
 public:
  CommandLineReport(const Options& o, std::ostream& err) : o_(o), err_(err) {}
  void emit(const nlohmann::json& j) const {
    if (o_.json && is_lead(o_.world.get())) std::cout << j.dump() << std::endl;
  }
  void epoch_started(int64_t epoch, int64_t epochs, int64_t batches) override {
    bar_ = std::make_unique<ProgressBar>("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs), batches, err_);
  }
  void batch_done(int64_t done, double loss, double accuracy, double ips) override {
    bar_->update(done, metrics(loss, accuracy, ips));
  }
  void epoch_done(const runtime::EpochReport& r) override {
    const runtime::EpochStats& st = r.train;
    bar_->finish(metrics(st.loss, st.accuracy, st.images_per_second));
    if (!st.decoded_by.empty() && st.decoded_by != decoded_by_) err_ << "data: images decoded by " << st.decoded_by << "\n";
    decoded_by_ = st.decoded_by;
    err_ << "data: waited " << fixed(st.data_wait_seconds, 1) << " s of " << fixed(st.seconds, 1) << " s ("
         << fixed(100 * st.data_wait_seconds / std::max(st.seconds, 1e-9), 0) << " %) for input\n";
    if (!r.skipped.empty()) err_ << "data: " << r.skipped << "\n";
    emit({{"event", "epoch"}, {"epoch", r.epoch}, {"loss", st.loss}, {"accuracy", st.accuracy},
          {"seconds", st.seconds}, {"images_per_second", st.images_per_second}, {"lr", st.lr},
          {"mean_threads", st.mean_threads}, {"data_wait_seconds", st.data_wait_seconds},
          {"skipped_images", r.skipped_images}, {"decoded_by", st.decoded_by}});
    if (r.epoch < r.epochs) err_ << "epoch " << r.epoch << ": " << eval_sentence(r.split, r.eval);
    emit({{"event", "eval"}, {"epoch", r.epoch}, {"split", r.split}, {"accuracy", r.eval.accuracy},
          {"top5_accuracy", r.eval.top5_accuracy}, {"loss", r.eval.loss}, {"images", r.eval.samples},
          {"seconds", r.eval.seconds}});
  }
  void checkpoint_saved(const std::string& path, int64_t epoch, int64_t step) override {
    emit({{"event", "checkpoint"}, {"path", path}, {"epoch", epoch}, {"step", step}});
  }

 private:
  static ProgressBar::Metrics metrics(double loss, double acc, double ips) {
    return {{"", fixed(ips, 0) + " img/s"}, {"loss", fixed(loss, 4)}, {"acc", fixed(100 * acc, 1) + "%"}};
  }
  const Options& o_;
  std::ostream& err_;
  std::unique_ptr<ProgressBar> bar_;
  std::string decoded_by_;  // said again only when it changes
};

int run_train(Options o) {
  distributed::World* world = o.world.get();
  const int ranks = world ? world->size() : 1;
  std::ostream& err = lead_stream(world, std::cerr);
  o.config.lr_step_epochs = runtime::parse_step_epochs(o.lr_steps, "--lr-steps");
  o.config.decode = runtime::parse_decode(o.decode, "--decode");
  o.lr_steps = runtime::step_epochs_text(o.config.lr_step_epochs);  // one spelling, compared on --resume
  o.config.compile.optimizer_kind = passes::parse_optimizer_kind(o.optimizer);
  if (o.config.compile.optimizer_kind == passes::OptimizerKind::AdamW) {  // torch.optim.AdamW's defaults
    if (!given(o, "--lr")) o.config.lr = passes::kAdamwDefaultLr;
    if (!given(o, "--weight-decay")) o.config.compile.weight_decay = passes::kAdamwDefaultWeightDecay;
  }
  if (o.skip_mismatched && o.weights_path.empty())
    throw Error("--skip-mismatched applies to --weights (fine-tuning from another model's tensors), which is not given");
  o.threads.apply();
  MemoryBudget budget = MemoryBudget::for_run(o.max_memory, "lower --batch");
  runtime::Checkpoint resume;
  if (!o.resume_path.empty()) {
    claim_file(budget, o.resume_path, "--resume '" + o.resume_path + "'");
    resume = runtime::load_checkpoint(o.resume_path);
    adopt_checkpoint(o, resume);
  }
  // --save is checked, and locked against other runs, before the first epoch, not after it.
  std::unique_ptr<PathLock> save_lock;
  if (!o.save_path.empty() && is_lead(world)) {
    const std::filesystem::path dir = std::filesystem::path(o.save_path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw Error("--save '" + o.save_path + "': the directory '" + dir.string() + "' does not exist");
    try {
      check_writable(o.save_path);
    } catch (const Error& e) {
      throw Error(std::string("--save: ") + e.what());
    }
    save_lock = std::make_unique<PathLock>(o.save_path, "--save");
  }
  o.data.batch = o.batch * ranks;  // the global batch: each rank takes its share below
  o.data.seed = o.config.seed;
  std::optional<data::ImageFolderInput> folder =
      data::find_image_folder(o.data, o.data.image_size == 0 && !o.data.synthetic ? model_side(o.model) : 0);
  frontend::LoadedModel net = load_model(o, folder, budget);
  if (!o.resume_path.empty()) check_model_file(o, net, resume.info);
  const frontend::ModelInfo* info = &net.info;
  data::TrainData data = data::load_train_data(o.data, *info, std::move(folder), budget);
  if (world) shard(data, *world, *info);

  o.config.compile.backend = resolve_device(o.device);
  o.config.compile.precision = precision_dtype(o.device);
  o.config.compile.memory_budget = &budget;
  o.config.backend_options = o.device.backend_options;
  o.config.backend_options.world = o.world;
  o.config.backend_options.sync_batchnorm = o.sync_bn;
  o.config.backend_options.batchnorm_group_size = o.bn_group;
  o.config.epochs = o.epochs;
  if (o.sync_bn && ranks == 1)
    err << "trident: notice: --sync-bn has no effect in one process: its batch is the global batch, so batch "
           "norm is the plain one (as PyTorch's SyncBatchNorm)\n";
  if (const std::string bad = runtime::non_finite_tensor(net.weights); !bad.empty())
    throw Error("'" + o.model + "' holds NaN or infinite values (in initializer '" + bad +
                "'); training from them can only give NaN");
  runtime::Trainer trainer(net.graph, o.config);
  if (!net.weights.empty()) trainer.train_executable().import_weights(net.weights, false);
  int64_t first_epoch = 0;
  if (!o.resume_path.empty()) {
    if (resume.info.dataset != data.name || resume.info.train_images != data.train_count)
      throw Error("checkpoint '" + o.resume_path + "' was trained on " + resume.info.dataset + " (" +
                  std::to_string(resume.info.train_images) + " images), not " + data.name + " (" +
                  std::to_string(data.train_count) + "); resume on the same data, or start a new run with --weights");
    runtime::resume_from(trainer, resume, o.resume_path, o.model);
    first_epoch = resume.info.epoch;
    resume.weights.clear();
  }
  if (!o.weights_path.empty()) {
    claim_file(budget, o.weights_path, "--weights '" + o.weights_path + "'");
    const runtime::LoadedWeights w = runtime::load_weight_file(o.weights_path, net.graph, trainer.train_executable(),
                                                               {.model = o.model, .skip_mismatched = o.skip_mismatched,
                                                                .refuse_non_finite = true});
    if (!w.skipped.empty()) err << "trident: notice: " << runtime::skipped_sentence(o.weights_path, w.skipped) << "\n";
  }
  CommandLineReport report(o, err);
  err << "training " << o.model << " on " << data.name << " (" << data.train_count
            << " images, batch " << o.batch << ", " << o.epochs << " epochs, backend "
            << o.config.compile.backend << ", " << o.device.precision << ", " << omp_get_max_threads() << " threads"
            << (ranks > 1 ? " per process, " + std::to_string(ranks) + " processes" : "") << ")\n";
  report.emit({{"event", "start"}, {"model", o.model}, {"dataset", data.name}, {"train_images", data.train_count},
               {"test_images", data.eval_count}, {"batch", o.batch}, {"epochs", o.epochs},
               {"backend", o.config.compile.backend}, {"precision", o.device.precision},
               {"threads", omp_get_max_threads()}, {"params", trainer.train_executable().parameter_count()},
               {"first_epoch", first_epoch + 1}, {"processes", ranks}});
  if (first_epoch > 0)
    err << "resuming from '" << o.resume_path << "' after epoch " << first_epoch << " (step "
              << trainer.step() << ")\n";

  runtime::TrainRunOptions run;
  run.first_epoch = first_epoch;
  run.epochs = o.epochs;
  run.classes = info->classes;
  run.log_path = o.log_path;
  run.save_path = o.save_path;
  runtime::CheckpointInfo& ck = run.checkpoint;
  ck.model = net.path.empty() ? o.model : net.path;
  if (!net.path.empty()) {
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", net.file_crc);
    ck.model_crc = crc;
  }
  ck.height = info->height, ck.width = info->width, ck.channels = info->channels, ck.classes = info->classes;
  ck.dataset = data.name;
  ck.train_images = data.train_count;
  ck.data = o.data;
  ck.data.dir = absolute_path(o.data.dir);
  ck.data.image_size = data.streamed ? static_cast<int>(info->height) : 0;
  ck.save_path = absolute_path(o.save_path);
  const runtime::EvalStats ev = runtime::run_epochs(trainer, data, run, report);
  // The result goes to stdout (with --json, stdout carries the JSON lines instead).
  lead_stream(world, o.json ? std::cerr : std::cout) << eval_sentence(data.eval_split, ev);
  report.emit({{"event", "test"}, {"split", data.eval_split}, {"accuracy", ev.accuracy}, {"top5_accuracy", ev.top5_accuracy},
               {"loss", ev.loss}, {"images", ev.samples}, {"seconds", ev.seconds}});
  return 0;
}

}  // namespace

RunSubcommand add_train_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("train", "Train a model (default: the Fashion-MNIST CNN)");
  sub->add_option("--model", o->model,
                  "Model name (trident info --list), or a PyTorch-exported MODEL.onnx: its initializers are the "
                  "initial weights, every BatchNormalization trains with batch statistics")
      ->capture_default_str();
  sub->add_option("--epochs", o->epochs, "Training epochs (the learning rate's cosine ends with the last)")->check(within(runtime::kEpochsLimit))->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size of each process (under mpirun -np N the global batch is N times it, as PyTorch DDP)")->check(within(runtime::kBatchLimit))->capture_default_str();
  sub->add_option("--optimizer", o->optimizer,
                  "sgd (momentum, weight decay, --nesterov: torch.optim.SGD) or adamw (torch.optim.AdamW: decoupled "
                  "weight decay, --beta1, --beta2, --eps; its --lr defaults to 0.001 and --weight-decay to 0.01)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return s == "sgd" || s == "adamw" ? "" : "must be sgd or adamw, not '" + s + "'";
          },
          "sgd|adamw"))
      ->capture_default_str();
  sub->add_option("--lr", o->config.lr, "Peak learning rate (the schedules apply to either optimizer): a linear warm-up from a tenth of it over --warmup epochs, then a cosine decay to 0 at the last step")->check(within(runtime::kLrLimit))->capture_default_str();
  sub->add_option("--momentum", o->config.compile.momentum, "SGD momentum (heavy ball; --nesterov for Nesterov's)")->check(within(runtime::kMomentumLimit))->capture_default_str();
  sub->add_option("--weight-decay", o->config.compile.weight_decay, "Weight decay of every parameter (batchnorm's and biases' too, as PyTorch's optimizers do): SGD adds it times the parameter to the gradient (L2); AdamW decays the parameter by lr times it before its step")->check(within(runtime::kWeightDecayLimit))->capture_default_str();
  sub->add_flag("--nesterov", o->config.compile.nesterov, "Nesterov momentum");
  sub->add_option("--beta1", o->config.compile.beta1, "AdamW: decay rate of the gradient's running mean")->check(within(runtime::kBeta1Limit))->capture_default_str();
  sub->add_option("--beta2", o->config.compile.beta2, "AdamW: decay rate of the squared gradient's running mean")->check(within(runtime::kBeta2Limit))->capture_default_str();
  sub->add_option("--eps", o->config.compile.adam_eps, "AdamW: added to the denominator's square root")->check(within(runtime::kAdamEpsLimit))->capture_default_str();
  sub->add_flag("--sync-bn", o->sync_bn,
                "Under mpirun, every batchnorm of training takes its statistics (and its backward sums) over "
                "the global batch of all processes, as PyTorch's SyncBatchNorm (on the GPU through NCCL)");
  sub->add_option("--bn-group", o->bn_group,
                  "With --sync-bn: take the statistics over groups of this many consecutive processes instead of all "
                  "of them (rank / K; it must divide the number of processes)")
      ->check(CLI::Range(1, 1 << 20))
      ->type_name("K");
  sub->add_option("--lr-steps", o->lr_steps,
                  "A step schedule instead of the cosine: after the warm-up, multiply the rate by --lr-gamma once each "
                  "of these many epochs is done, e.g. 30,60,80 (as torch's MultiStepLR: 30 lowers it from the 31st epoch)")
      ->type_name("E1,E2,...");
  sub->add_option("--lr-gamma", o->config.lr_gamma, "The step schedule's factor (see --lr-steps)")
      ->check(within(runtime::kLrGammaLimit))
      ->capture_default_str();
  sub->add_option("--label-smoothing", o->config.compile.label_smoothing,
                  "Cross-entropy against (1 - e)·onehot + e/classes, as PyTorch's label_smoothing = e (0: none)")
      ->check(within(runtime::kLabelSmoothingLimit))
      ->capture_default_str();
  sub->add_option("--warmup", o->config.warmup_epochs, "Warm-up length in epochs (see --lr)")->check(within(runtime::kWarmupLimit))->capture_default_str();
  add_seed_option(sub, o->config.seed, "Seed for initialisation and shuffling");
  sub->add_option("--data", o->data.dir,
                  "Dataset directory: Fashion-MNIST's IDX files, CIFAR-10's binary batches (cifar-10-batches-bin), "
                  "or an image folder as torchvision's ImageFolder reads it (DIR/train/<class>/*.jpg|png and "
                  "DIR/val/<class>/..., decoded and augmented while training, evaluated on val after every epoch), "
                  "told apart by what it holds (default: the Debian package's Fashion-MNIST)");
  sub->add_option("--image-size", o->data.image_size,
                  "Image folders: the side S of the square crops the network takes (3 x S x S; default: the "
                  "model's own input side, an ONNX model's or a zoo model's default, 224 for resnet18); "
                  "training crops with RandomResizedCrop and flips, evaluation resizes the shorter side to S/0.875 "
                  "and crops the centre")
      ->check(CLI::Range(8, 4096));
  sub->add_option("--workers", o->data.workers,
                  "Image folders: threads decoding and augmenting images (default: the cores but one); the batches "
                  "do not depend on it")
      ->check(CLI::Range(1, 256));
  sub->add_option("--decode", o->decode,
                  "Image folders on the GPU: where training images are decoded and augmented: gpu (nvJPEG, the "
                  "crop, flip and normalisation on the device; files it cannot take on the CPU), cpu (the "
                  "--workers threads), or auto (default: gpu where the GPU can decode JPEGs)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}));
  sub->add_flag("!--no-upload-ahead", o->config.upload_ahead,
                "On the GPU, fetch each batch and upload it between two steps instead of while the step "
                "before it runs (the parameters are the same; the epoch line's wait for data is then the "
                "fetch's time)");
  sub->add_flag("--synthetic", o->data.synthetic, "Train on synthetic data of the model's input shape");
  sub->add_option("--train-limit", o->data.train_limit,
                  "Read only N training images (0: all): the first N of Fashion-MNIST or CIFAR-10, a sample across "
                  "an image folder's classes drawn from --seed")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--test-limit", o->data.test_limit,
                  "Read only N test (image folders: val) images (0: all), as --train-limit")
      ->check(CLI::NonNegativeNumber);
  add_thread_options(sub, o->threads);
  add_memory_option(sub, o->max_memory);
  sub->add_flag("--json", o->json, "Print one JSON line per event on stdout");
  sub->add_option("--log", o->log_path,
                  "Write a metrics file: one JSON line per epoch (training loss and accuracy, evaluation loss, top-1 "
                  "and top-5, learning rate, images/s, seconds waiting for data)")
      ->type_name("FILE.jsonl");
  CLI::Option* save = sub->add_option(
      "--save", o->save_path,
      "Write a checkpoint (safetensors: weights, BN statistics, optimizer state, step, settings) after "
      "every epoch, replacing CKPT atomically; checked before the first epoch and locked "
      "(CKPT.lock) so a second run saving to it refuses");
  save->type_name("CKPT");
  CLI::Option* resume = sub->add_option(
      "--resume", o->resume_path,
      "Continue the run saved in CKPT from its next epoch up to --epochs (default: the run's "
      "planned total), with its model (an ONNX file checked to be the same), data, limits, image size, "
      "batch, seed and hyper-parameters, saving to CKPT after every epoch (or to --save); the result equals "
      "an uninterrupted run. A finished checkpoint is only evaluated");
  resume->type_name("CKPT");
  sub->add_option("--weights", o->weights_path,
                  "Start a new run (step 0) from the tensors of a safetensors file (a checkpoint, or a PyTorch "
                  "state dict: told apart by content), matched by name; "
                  "tensors it lacks keep their initial values, extra or mis-shaped ones are errors (see "
                  "--skip-mismatched)")
      ->type_name("FILE")
      ->excludes(resume);
  sub->add_flag("--skip-mismatched", o->skip_mismatched,
                "With --weights: skip the tensors whose shape differs from the model's, or that the model lacks, "
                "and say which (fine-tuning: a torchvision state dict onto a model with a new classifier)");
  add_device_options(sub, o->device);
  add_compile_flags(sub, o->config.compile);
  o->app = sub;
  return [o] {
    o->world = distributed::join_world();  // null without mpirun: MPI is not initialised then
    return run_as_rank(o->world.get(), [&] { return run_train(*o); });
  };
}

}  // namespace trident::cli
