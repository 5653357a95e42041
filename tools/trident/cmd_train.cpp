// `trident train`: trains a zoo model or an ONNX model on Fashion-MNIST, CIFAR-10, an image
// folder (train_data.h) or synthetic data of the model's shape, with a progress bar per epoch on
// stderr and, with --json, one JSON line per event
// on stdout. Ends with the test accuracy, on stdout; a run whose loss blows up stops with a
// sentence and exit 1. --save writes a checkpoint after every epoch, --resume continues one
// exactly, --weights starts a fresh run from saved tensors.
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
#include "frontend/onnx/onnx_import.h"
#include "frontend/zoo.h"
#include "runtime/default_batch.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/data/sharded_batches.h"
#include "runtime/progress.h"
#include "runtime/trainer.h"
#include "rank.h"
#include "train_data.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = frontend::default_model();
  int64_t epochs = 3;
  int64_t batch = runtime::kDefaultTrainBatch;
  runtime::TrainConfig config;
  TrainDataFlags data;  // its batch and seed are set from the two above when the data is opened
  ThreadFlags threads;
  bool json = false;
  DeviceFlags device;
  std::string save_path, resume_path, weights_path, log_path;
  std::string lr_steps;  // --lr-steps as given; parsed into config.lr_step_epochs
  std::string optimizer = "sgd";  // --optimizer as given; parsed into config.compile.optimizer_kind
  std::string max_memory;
  bool sync_bn = false;  // --sync-bn: batchnorm statistics over the global batch
  int bn_group = 0;      // --bn-group: ... or over groups of this many processes
  // The data-parallel job this process is one rank of (under mpirun), else null.
  std::shared_ptr<distributed::World> world;
  CLI::App* app = nullptr;  // to tell flags given on the command line from defaults
};

// A resumed run takes its settings from the checkpoint, so it retraces the interrupted run. A
// flag given explicitly must agree; --epochs may change (it stretches the schedule's tail).
void adopt_checkpoint(Options& o, const runtime::Checkpoint& ck) {
  const runtime::CheckpointInfo& i = ck.info;
  auto given = [&](const char* flag) { return o.app && o.app->count(flag) > 0; };
  auto adopt = [&](const char* flag, auto& mine, const auto& theirs) {
    if (given(flag) && mine != theirs) {
      std::ostringstream os;
      os << flag << " differs from the checkpoint '" << o.resume_path << "' (which has " << theirs
         << "); a resumed run keeps the checkpoint's settings, so drop the flag or start a new run with --weights";
      throw Error(os.str());
    }
    mine = theirs;
  };
  adopt("--model", o.model, i.model);
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
  if (!given("--epochs")) o.epochs = i.config.epochs;
  if (!given("--device") && !given("--backend")) o.device.device = i.config.compile.backend;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// The network to train: a zoo model, or an ONNX file (exported from PyTorch) whose
// initializers are its initial weights and whose input and output give its image shape and
// class count.
struct TrainModel {
  ir::Graph graph;
  frontend::ModelInfo info;
  runtime::WeightMap weights;  // ONNX: the initial parameters and statistics
};

bool is_onnx_path(const std::string& s) { return s.size() > 5 && s.ends_with(".onnx"); }

// An image folder gives a zoo model its input (3 x S x S) and class count; an ONNX model's are
// in the file, and load_train_data checks them.
TrainModel load_model(const Options& o, const std::optional<ImageFolderInput>& folder) {
  TrainModel m;
  if (!is_onnx_path(o.model)) {
    frontend::ModelConfig cfg{o.batch};
    if (folder) {
      cfg.height = cfg.width = folder->image_size;
      cfg.channels = 3;
      cfg.classes = static_cast<int64_t>(folder->train.classes.size());
    }
    m.graph = frontend::build_model(o.model, cfg);  // throws the unknown-model sentence
    for (const auto& z : frontend::model_list())
      if (z.name == o.model) m.info = z;
    if (folder) m.info = {m.info.name, m.info.summary, cfg.height, cfg.width, cfg.channels, cfg.classes};
    return m;
  }
  frontend::OnnxOptions opt;
  opt.batch = o.batch;
  opt.train = true;
  frontend::OnnxImport imp = frontend::import_onnx(o.model, opt);
  for (const std::string& notice : imp.notices) lead_stream(o.world.get(), std::cerr) << "trident: notice: " << notice << "\n";
  const ir::Value& input = imp.graph.value(imp.graph.find_value(imp.input_name));
  if (imp.graph.outputs().size() != 1 || imp.graph.value(imp.graph.outputs()[0]).shape.size() != 2 ||
      input.shape.size() != 4)
    throw Error("'" + o.model + "' must take one image batch [N,C,H,W] and give one [N, classes] output to be "
                "trained as a classifier");
  m.info = {o.model, "ONNX model", input.shape[1], input.shape[2], input.shape[3],
            imp.graph.value(imp.graph.outputs()[0]).shape[1]};
  imp.graph.value(input.id).name = "images";  // the name the trainer feeds
  m.graph = std::move(imp.graph);
  m.weights = std::move(imp.weights);
  return m;
}

// "test accuracy 91.52% on 10000 images (loss 0.2410, 5120 img/s)", with its line end.
std::string eval_sentence(const std::string& split, const runtime::EvalStats& ev) {
  return split + " accuracy " + fixed(100 * ev.accuracy, 2) + "% (top-5 " + fixed(100 * ev.top5_accuracy, 2) + "%) on " +
         std::to_string(ev.samples) + " images (loss " + fixed(ev.loss, 4) + ", " + fixed(ev.samples / ev.seconds, 0) +
         " img/s)\n";
}

// Stops a run whose weights have blown up instead of training on (and saving) them: the mean
// loss of the epoch so far is not finite, or 100 times what guessing uniformly among the
// classes scores. The last checkpoint written (the previous epoch's) stays as it was.
void check_divergence(const Options& o, double loss, int64_t classes, int64_t epoch, int64_t batch, int64_t batches) {
  const double chance = std::log(static_cast<double>(std::max<int64_t>(classes, 2)));
  if (std::isfinite(loss) && loss <= 100 * chance) return;
  std::ostringstream os;
  os << "training diverged in epoch " << epoch << " at batch " << batch << " of " << batches << ": the loss is "
     << std::setprecision(3) << loss << " where guessing scores " << std::setprecision(3) << chance
     << "; lower --lr (it is " << o.config.lr << ")";
  if (!o.save_path.empty() && epoch > 1) os << "; '" << o.save_path << "' keeps epoch " << epoch - 1;
  throw Error(os.str());
}

// Each rank reads its own slice of every global batch (data/sharded_batches.h).
void shard(TrainData& data, const distributed::World& world, const frontend::ModelInfo& info) {
  const int64_t row = info.height * info.width * info.channels;
  data.train = std::make_unique<data::ShardedBatches>(std::move(data.train), world.rank(), world.size(), row);
  data.eval = std::make_unique<data::ShardedBatches>(std::move(data.eval), world.rank(), world.size(), row);
}

int run_train(Options o) {
  distributed::World* world = o.world.get();
  const int ranks = world ? world->size() : 1;
  std::ostream& err = lead_stream(world, std::cerr);
  o.config.lr_step_epochs = runtime::parse_step_epochs(o.lr_steps, "--lr-steps");
  o.lr_steps = runtime::step_epochs_text(o.config.lr_step_epochs);  // one spelling, compared on --resume
  o.config.compile.optimizer_kind = passes::parse_optimizer_kind(o.optimizer);
  if (o.config.compile.optimizer_kind == passes::OptimizerKind::AdamW) {  // torch.optim.AdamW's defaults
    if (!o.app || o.app->count("--lr") == 0) o.config.lr = passes::kAdamwDefaultLr;
    if (!o.app || o.app->count("--weight-decay") == 0) o.config.compile.weight_decay = passes::kAdamwDefaultWeightDecay;
  }
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
  std::optional<ImageFolderInput> folder = find_image_folder(o.data);
  TrainModel net = load_model(o, folder);
  const frontend::ModelInfo* info = &net.info;
  TrainData data = load_train_data(o.data, *info, std::move(folder), budget);
  if (world) shard(data, *world, *info);

  o.config.compile.backend = resolve_device(o.device);
  o.config.compile.precision = precision_dtype(o.device);
  o.config.compile.memory_budget = &budget;
  o.config.backend_options = o.device.backend_options;
  o.config.backend_options.world = o.world;
  o.config.backend_options.sync_batchnorm = o.sync_bn;
  o.config.backend_options.batchnorm_group_size = o.bn_group;
  if (o.sync_bn && ranks == 1)
    err << "trident: notice: --sync-bn has no effect in one process: its batch is the global batch, so batch "
           "norm is the plain one (as PyTorch's SyncBatchNorm)\n";
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
    runtime::WeightMap w = runtime::read_weight_file(o.weights_path, net.graph).weights;
    // The other optimizer's state (an SGD checkpoint starting an AdamW run) has no place here.
    std::erase_if(w, [&](const auto& entry) {
      return passes::is_optimizer_state_name(entry.first) && trainer.train_executable().graph().find_value(entry.first) < 0;
    });
    try {
      trainer.train_executable().import_weights(w, false);
    } catch (const Error& e) {
      throw Error("--weights '" + o.weights_path + "' does not fit model '" + o.model + "': " + e.what());
    }
  }
  data::BatchSource& batches = *data.train;
  auto emit = [&](const nlohmann::json& j) {
    if (o.json && is_lead(world)) std::cout << j.dump() << std::endl;
  };
  err << "training " << o.model << " on " << data.name << " (" << data.train_count
            << " images, batch " << o.batch << ", " << o.epochs << " epochs, backend "
            << o.config.compile.backend << ", " << o.device.precision << ", " << omp_get_max_threads() << " threads"
            << (ranks > 1 ? " per process, " + std::to_string(ranks) + " processes" : "") << ")\n";
  emit({{"event", "start"}, {"model", o.model}, {"dataset", data.name}, {"train_images", data.train_count},
        {"test_images", data.eval_count}, {"batch", o.batch}, {"epochs", o.epochs},
        {"backend", o.config.compile.backend}, {"precision", o.device.precision}, {"threads", omp_get_max_threads()},
        {"params", trainer.train_executable().parameter_count()}, {"first_epoch", first_epoch + 1},
        {"processes", ranks}});
  if (first_epoch > 0)
    err << "resuming from '" << o.resume_path << "' after epoch " << first_epoch << " (step "
              << trainer.step() << ")\n";

  // The metrics file, one JSON line per epoch; opened (and so checked) before the first epoch.
  std::optional<std::ofstream> log;
  if (!o.log_path.empty() && is_lead(world)) {
    log.emplace(o.log_path, std::ios::out | std::ios::trunc);
    if (!*log) throw Error("cannot create the metrics file '" + o.log_path + "' (--log)");
  }
  std::optional<runtime::EvalStats> last_eval;
  for (int64_t e = first_epoch; e < o.epochs; ++e) {
    ProgressBar bar("epoch " + std::to_string(e + 1) + "/" + std::to_string(o.epochs),
                    batches.batches_per_epoch(), err);
    auto metrics = [](double loss, double acc, double ips) {
      return ProgressBar::Metrics{{"", fixed(ips, 0) + " img/s"}, {"loss", fixed(loss, 4)},
                                  {"acc", fixed(100 * acc, 1) + "%"}};
    };
    runtime::EpochStats st = trainer.train_epoch(
        batches, e, o.epochs,
        [&](int64_t done, int64_t, double loss, double acc, double ips) {
          bar.update(done, metrics(loss, acc, ips));
          check_divergence(o, loss, info->classes, e + 1, done, batches.batches_per_epoch());
        });
    bar.finish(metrics(st.loss, st.accuracy, st.images_per_second));
    err << "data: waited " << fixed(st.data_wait_seconds, 1) << " s of " << fixed(st.seconds, 1) << " s ("
              << fixed(100 * st.data_wait_seconds / std::max(st.seconds, 1e-9), 0) << " %) for input\n";
    if (const std::string skipped = data.skipped_report(); !skipped.empty()) err << "data: " << skipped << "\n";
    emit({{"event", "epoch"}, {"epoch", e + 1}, {"loss", st.loss}, {"accuracy", st.accuracy},
          {"seconds", st.seconds}, {"images_per_second", st.images_per_second}, {"lr", st.lr},
          {"mean_threads", st.mean_threads}, {"data_wait_seconds", st.data_wait_seconds}});
    // The evaluation split after every epoch; the last one is the run's result below.
    last_eval = trainer.evaluate(*data.eval);
    if (e + 1 < o.epochs) err << "epoch " << e + 1 << ": " << eval_sentence(data.eval_split, *last_eval);
    emit({{"event", "eval"}, {"epoch", e + 1}, {"split", data.eval_split}, {"accuracy", last_eval->accuracy},
          {"top5_accuracy", last_eval->top5_accuracy}, {"loss", last_eval->loss}, {"images", last_eval->samples},
          {"seconds", last_eval->seconds}});
    if (log) {
      *log << nlohmann::json{{"epoch", e + 1},
                             {"train_loss", st.loss},
                             {"train_accuracy", st.accuracy},
                             {"split", data.eval_split},
                             {"eval_loss", last_eval->loss},
                             {"eval_accuracy", last_eval->accuracy},
                             {"eval_top5_accuracy", last_eval->top5_accuracy},
                             {"lr", st.lr},
                             {"images_per_second", st.images_per_second},
                             {"seconds", st.seconds},
                             {"data_wait_seconds", st.data_wait_seconds}}
                  .dump()
           << std::endl;
      if (!*log) throw Error("cannot write the metrics file '" + o.log_path + "'");
    }
    if (!o.save_path.empty()) trainer.average_running_statistics();  // every rank: a collective
    if (!o.save_path.empty() && is_lead(world)) {
      runtime::CheckpointInfo info = runtime::checkpoint_info(trainer);
      info.model = o.model;
      info.epoch = e + 1;
      info.config.epochs = o.epochs;
      info.dataset = data.name;
      info.train_images = data.train_count;
      runtime::save_checkpoint(o.save_path, trainer, info);
      emit({{"event", "checkpoint"}, {"path", o.save_path}, {"epoch", e + 1}, {"step", trainer.step()}});
    }
  }
  const runtime::EvalStats ev = last_eval ? *last_eval : trainer.evaluate(*data.eval);
  // The result goes to stdout (with --json, stdout carries the JSON lines instead).
  lead_stream(world, o.json ? std::cerr : std::cout) << eval_sentence(data.eval_split, ev);
  emit({{"event", "test"}, {"split", data.eval_split}, {"accuracy", ev.accuracy}, {"top5_accuracy", ev.top5_accuracy},
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
                  "Image folders: the side S of the square crops the network takes (3 x S x S; default 224); "
                  "training crops with RandomResizedCrop and flips, evaluation resizes the shorter side to S/0.875 "
                  "and crops the centre")
      ->check(CLI::Range(8, 4096));
  sub->add_option("--workers", o->data.workers,
                  "Image folders: threads decoding and augmenting images (default: the cores but one); the batches "
                  "do not depend on it")
      ->check(CLI::Range(1, 256));
  sub->add_flag("!--no-upload-ahead", o->config.upload_ahead,
                "On the GPU, fetch each batch and upload it between two steps instead of while the step "
                "before it runs (the parameters are the same; the epoch line's wait for data is then the "
                "fetch's time)");
  sub->add_flag("--synthetic", o->data.synthetic, "Train on synthetic data of the model's input shape");
  sub->add_option("--train-limit", o->data.train_limit, "Read only the first N training images (0: all)")->check(CLI::NonNegativeNumber);
  sub->add_option("--test-limit", o->data.test_limit, "Read only the first N test (image folders: val) images (0: all)")->check(CLI::NonNegativeNumber);
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
      "planned total), with its model, batch, seed and hyper-parameters; the result equals an "
      "uninterrupted run. A finished checkpoint is only evaluated");
  resume->type_name("CKPT");
  sub->add_option("--weights", o->weights_path,
                  "Start a new run (step 0) from the tensors of a safetensors file (a checkpoint, or a PyTorch "
                  "state dict: told apart by content), matched by name; "
                  "tensors it lacks keep their initial values, extra or mis-shaped ones are errors")
      ->type_name("FILE")
      ->excludes(resume);
  add_device_options(sub, o->device);
  add_compile_flags(sub, o->config.compile);
  o->app = sub;
  return [o] {
    o->world = distributed::join_world();  // null without mpirun: MPI is not initialised then
    return run_as_rank(o->world.get(), [&] { return run_train(*o); });
  };
}

}  // namespace trident::cli
