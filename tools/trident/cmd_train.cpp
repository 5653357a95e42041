// `trident train`: trains a zoo model on Fashion-MNIST (or synthetic data of the model's
// shape), with a progress bar per epoch on stderr and, with --json, one JSON line per event
// on stdout. Ends with the test accuracy.
#include <omp.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/progress.h"
#include "runtime/trainer.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = frontend::default_model();
  int64_t epochs = 3;
  int64_t batch = 64;
  runtime::TrainConfig config;
  std::string data_dir;
  bool synthetic = false;
  int64_t train_limit = 0, test_limit = 0;
  int threads = 0;
  bool json = false;
  CompileFlags flags;
};

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

void load_data(const Options& o, const frontend::ModelInfo& info, data::Dataset& train,
               data::Dataset& test) {
  if (o.synthetic) {
    // One draw split in two, so the test images share the training classes' templates.
    const int64_t n_train = o.train_limit ? o.train_limit : 4096, n_test = o.test_limit ? o.test_limit : 1024;
    data::Dataset all = data::make_synthetic(n_train + n_test, info.height, info.width, info.channels,
                                             info.classes, o.config.seed);
    train = data::subset(all, 0, n_train);
    test = data::subset(all, n_train, n_test);
    return;
  }
  const std::string dir = o.data_dir.empty() ? data::default_fashion_mnist_dir() : o.data_dir;
  train = data::load_fashion_mnist(dir, "train");
  test = data::load_fashion_mnist(dir, "test");
  if (train.height != info.height || train.width != info.width || train.channels != info.channels ||
      train.num_classes != info.classes)
    throw Error("model '" + info.name + "' expects " + std::to_string(info.height) + "x" +
                std::to_string(info.width) + "x" + std::to_string(info.channels) + " images in " +
                std::to_string(info.classes) + " classes, but Fashion-MNIST has 28x28x1 in 10; "
                "use --synthetic for this model");
  if (o.train_limit) train = data::subset(train, 0, std::min(o.train_limit, train.count));
  if (o.test_limit) test = data::subset(test, 0, std::min(o.test_limit, test.count));
}

int run_train(Options o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const frontend::ModelInfo* info = nullptr;
  for (const auto& m : frontend::model_list())
    if (m.name == o.model) info = &m;
  if (!info) frontend::build_model(o.model, {1});  // throws the unknown-model sentence
  data::Dataset train, test;
  load_data(o, *info, train, test);
  if (o.batch > train.count)
    throw Error("--batch " + std::to_string(o.batch) + " is larger than the " +
                std::to_string(train.count) + " training images");

  o.config.disabled_passes = o.flags.disabled_passes;
  o.config.dump_dir = o.flags.dump_dir;
  ir::Graph model = frontend::build_model(o.model, {o.batch});
  runtime::Trainer trainer(model, o.config);
  data::BatchIterator batches(train, o.batch, true, o.config.seed, true);
  auto emit = [&](const nlohmann::json& j) {
    if (o.json) std::cout << j.dump() << std::endl;
  };
  std::cerr << "training " << o.model << " on " << train.name << " (" << train.count
            << " images, batch " << o.batch << ", " << o.epochs << " epochs, backend "
            << o.config.backend << ", " << omp_get_max_threads() << " threads)\n";
  emit({{"event", "start"}, {"model", o.model}, {"dataset", train.name}, {"train_images", train.count},
        {"test_images", test.count}, {"batch", o.batch}, {"epochs", o.epochs},
        {"backend", o.config.backend}, {"threads", omp_get_max_threads()},
        {"params", trainer.train_executable().parameter_count()}});

  for (int64_t e = 0; e < o.epochs; ++e) {
    ProgressBar bar("epoch " + std::to_string(e + 1) + "/" + std::to_string(o.epochs),
                    batches.batches_per_epoch());
    auto metrics = [](double loss, double acc, double ips) {
      return ProgressBar::Metrics{{"", fixed(ips, 0) + " img/s"}, {"loss", fixed(loss, 4)},
                                  {"acc", fixed(100 * acc, 1) + "%"}};
    };
    runtime::EpochStats st = trainer.train_epoch(
        batches, e, o.epochs,
        [&](int64_t done, int64_t, double loss, double acc, double ips) {
          bar.update(done, metrics(loss, acc, ips));
        });
    bar.finish(metrics(st.loss, st.accuracy, st.images_per_second));
    emit({{"event", "epoch"}, {"epoch", e + 1}, {"loss", st.loss}, {"accuracy", st.accuracy},
          {"seconds", st.seconds}, {"images_per_second", st.images_per_second}, {"lr", st.lr}});
  }
  runtime::EvalStats ev = trainer.evaluate(test);
  std::cerr << "test accuracy " << fixed(100 * ev.accuracy, 2) << "% on " << ev.samples
            << " images (loss " << fixed(ev.loss, 4) << ", " << fixed(ev.samples / ev.seconds, 0)
            << " img/s)\n";
  emit({{"event", "test"}, {"accuracy", ev.accuracy}, {"loss", ev.loss}, {"images", ev.samples},
        {"seconds", ev.seconds}});
  return 0;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("train", "Train a model (default: the Fashion-MNIST CNN)");
  sub->add_option("--model", o->model, "Model name (trident info --list)")->capture_default_str();
  sub->add_option("--epochs", o->epochs, "Training epochs")->check(CLI::Range(1, 100000))->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size")->check(CLI::Range(1, 65536))->capture_default_str();
  sub->add_option("--lr", o->config.lr, "Peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--momentum", o->config.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  sub->add_option("--weight-decay", o->config.weight_decay, "L2 weight decay")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  sub->add_flag("--nesterov", o->config.nesterov, "Nesterov momentum");
  sub->add_option("--warmup", o->config.warmup_epochs, "Warm-up length in epochs")->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  sub->add_option("--seed", o->config.seed, "Seed for initialisation and shuffling")->capture_default_str();
  sub->add_option("--backend", o->config.backend, "Backend that runs the kernels")
      ->check(CLI::IsMember({"cpu_ref"}))->capture_default_str();
  sub->add_option("--data", o->data_dir, "Fashion-MNIST directory (default: the Debian package's)");
  sub->add_flag("--synthetic", o->synthetic, "Train on synthetic data of the model's input shape");
  sub->add_option("--train-limit", o->train_limit, "Use only the first N training images (0: all)")->check(CLI::NonNegativeNumber);
  sub->add_option("--test-limit", o->test_limit, "Use only the first N test images (0: all)")->check(CLI::NonNegativeNumber);
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::Range(1, 1024));
  sub->add_flag("--json", o->json, "Print one JSON line per event on stdout");
  add_compile_flags(sub, o->flags);
  return [o] { return run_train(*o); };
}

}  // namespace trident::cli
