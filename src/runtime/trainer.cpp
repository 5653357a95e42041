// The training loop. One executable step does forward, backward and the optimizer step; the loop
// only gets a batch in, sets the learning rate, and reads the loss and logits back. On a device
// the next batch is fetched and copied there while the step runs (an input lane).
#include "runtime/trainer.h"
#include "runtime/train_limits.h"
#include "core/printable.h"

#include <algorithm>
#include <charconv>

#include <omp.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "runtime/batch_feed.h"
#include "runtime/queued_steps.h"
#include "runtime/data/sharded_batches.h"
#include "runtime/distributed/world.h"

namespace trident::runtime {

double learning_rate(int64_t step, int64_t total, int64_t warmup, double base) {
  if (step < warmup) return base * (0.1 + 0.9 * static_cast<double>(step + 1) / warmup);
  const double t = static_cast<double>(step - warmup) / std::max<int64_t>(total - warmup, 1);
  return base * 0.5 * (1.0 + std::cos(3.141592653589793 * std::min(t, 1.0)));
}

double step_learning_rate(int64_t step, int64_t warmup, double base, const std::vector<int64_t>& milestones,
                          double gamma) {
  if (step < warmup) return base * (0.1 + 0.9 * static_cast<double>(step + 1) / warmup);
  double lr = base;
  for (int64_t m : milestones)
    if (step >= m) lr *= gamma;
  return lr;
}

std::vector<int64_t> parse_step_epochs(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    int64_t v = 0;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || v < 1 ||
        v > static_cast<int64_t>(kEpochsLimit.max) || (!out.empty() && v <= out.back()))
      throw Error(what + " must be increasing epoch numbers from 1 to " + std::to_string(int64_t(kEpochsLimit.max)) +
                  " separated by commas, e.g. 30,60,80; got " + quoted_name(text));
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

std::string step_epochs_text(const std::vector<int64_t>& epochs) {
  std::string s;
  for (int64_t e : epochs) s += (s.empty() ? "" : ",") + std::to_string(e);
  return s;
}

int64_t count_correct(const float* logits, const int32_t* labels, int64_t rows, int64_t classes) {
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    int64_t best = 0;
    for (int64_t k = 1; k < classes; ++k)
      if (z[k] > z[best]) best = k;
    correct += best == labels[r];
  }
  return correct;
}

namespace {
// The user's --disable-pass names, split over the training and the inference pipeline: each
// executable gets the ones its pipeline has; a name in neither is an error with the lists.
void split_disabled(const std::vector<std::string>& names, passes::CompileOptions& train,
                    passes::CompileOptions& infer) {
  train.disabled_passes.clear();
  infer.disabled_passes.clear();
  const passes::PassManager tp = passes::standard_pipeline(passes::Mode::Train, with_backend_traits(train));
  const passes::PassManager ip = passes::standard_pipeline(passes::Mode::Infer, with_backend_traits(infer));
  auto has = [](const passes::PassManager& pm, const std::string& n) {
    for (const passes::Pass& p : pm.passes())
      if (p.name == n) return true;
    return false;
  };
  for (const std::string& n : names) {
    if (has(tp, n)) train.disabled_passes.push_back(n);
    if (has(ip, n)) infer.disabled_passes.push_back(n);
    if (!has(tp, n) && !has(ip, n)) {
      std::string known;
      for (const auto* pm : {&tp, &ip})
        for (const passes::Pass& p : pm->passes())
          if (known.find(p.name) == std::string::npos) known += (known.empty() ? "" : ", ") + p.name;
      throw Error("unknown pass '" + n + "' (passes: " + known + ")");
    }
  }
}
// A source writes batch() rows into the executable's input, which holds `batch` rows.
void check_batch_fits(const data::BatchSource& batches, int64_t batch, const char* purpose) {
  if (batches.batch() != batch)
    throw Error(std::string(purpose) + " batches of " + std::to_string(batches.batch()) +
                " images do not fit the executable's batch of " + std::to_string(batch));
}
}  // namespace

void make_batchnorm_group(BackendOptions& o) {
  const int k = o.batchnorm_group_size;
  if (k == 0) return;
  if (k < 0) throw Error("--bn-group must be a positive number of processes, not " + std::to_string(k));
  if (!o.sync_batchnorm) throw Error("--bn-group " + std::to_string(k) + " sets the size of sync-BN's groups: it needs --sync-bn");
  if (!o.world) return;  // one process: its group is itself, as its batch is the global one
  if (o.world->size() % k != 0)
    throw Error("--bn-group " + std::to_string(k) + " does not divide the " + std::to_string(o.world->size()) +
                " processes into equal groups");
  o.batchnorm_group = o.world->split(o.world->rank() / k);
}

Trainer::Trainer(const ir::Graph& model, TrainConfig config) : config_(std::move(config)) {
  passes::CompileOptions train_opt = config_.compile, eval_opt = config_.compile;
  train_opt.mode = passes::Mode::Train;
  eval_opt.mode = passes::Mode::Infer;
  // Evaluation keeps the direct convolutions: a run's accuracies must not depend on which
  // algorithm start-up timing happened to prefer.
  BackendOptions eval_backend = config_.backend_options;
  eval_backend.winograd = 0;
  make_batchnorm_group(config_.backend_options);
  split_disabled(config_.compile.disabled_passes, train_opt, eval_opt);
  train_opt.distributed = config_.backend_options.world != nullptr;
  train_opt.world_size = world_size();
  if (!config_.compile.dump_dir.empty()) {
    train_opt.dump_dir = config_.compile.dump_dir + "/train";
    eval_opt.dump_dir = config_.compile.dump_dir + "/infer";
  }
  train_ = Executable::compile(model, train_opt, config_.backend_options);
  eval_ = Executable::compile(model, eval_opt, eval_backend);
  batch_ = train_->find("images").shape[0];
  train_->init_parameters(config_.seed);
}

int Trainer::world_size() const {
  return config_.backend_options.world ? config_.backend_options.world->size() : 1;
}

void Trainer::restore(const WeightMap& weights, int64_t step) {
  if (step < 0) throw Error("cannot restore a negative step count " + std::to_string(step));
  train_->import_weights(weights, true);
  step_ = step;
}

void Trainer::set_schedule(double lr, double warmup_epochs, int64_t step, std::vector<int64_t> step_epochs,
                           double gamma) {
  config_.lr = lr;
  config_.warmup_epochs = warmup_epochs;
  config_.lr_step_epochs = std::move(step_epochs);
  config_.lr_gamma = gamma;
  step_ = step;
}

TrainConfig::Decode parse_decode(const std::string& text, const std::string& what) {
  if (text == "auto") return TrainConfig::Decode::automatic;
  if (text == "gpu") return TrainConfig::Decode::gpu;
  if (text == "cpu") return TrainConfig::Decode::cpu;
  throw Error(what + " is " + quoted_name(text) + "; it takes auto, gpu or cpu");
}

EpochStats Trainer::train_epoch(data::BatchSource& batches, int64_t epoch, int64_t epochs_total,
                                const BatchCallback& on_batch) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const int images_id = train_->value_id("images");
  if (train_->graph().value(images_id).dtype != DType::f32) throw Error("training from data needs an f32 model");
  check_batch_fits(batches, batch_, "training");
  const int64_t per_epoch = batches.batches_per_epoch();
  const int64_t total = per_epoch * epochs_total;
  const int64_t warmup = static_cast<int64_t>(config_.warmup_epochs * per_epoch);
  std::vector<int64_t> milestones;  // the step schedule's epochs, in steps
  for (int64_t e : config_.lr_step_epochs) milestones.push_back(e * per_epoch);
  const int64_t classes = train_->view(train_->logits()).shape[1];

  // Step k's labels, learning rate, loss and logits pass through slot k % 2 (queued_steps.h):
  // step k + 1 is queued before step k is read back. With a lane, batch k + 1 is also sent while
  // step k runs: from where the source made it when it hands batches out in place (an image
  // folder's ring), else fetched into the lane's host buffer; without a lane, fetched into the
  // input's host copy once step k has been read back.
  if (!queued_) queued_ = std::make_unique<QueuedSteps>(*train_);
  QueuedSteps& queued = *queued_;
  if (config_.upload_ahead && train_->on_device() && !lane_) lane_ = train_->make_input_lane(images_id);
  InputLane* lane = config_.upload_ahead ? lane_.get() : nullptr;
  BatchFeed feed(batches, lane, lane ? TensorView{} : train_->host_view(images_id), config_.decode,
                 config_.send_pixels, "training");

  batches.start_epoch(epoch);
  EpochStats st;
  st.epoch = epoch;
  st.decoded_by = feed.decoded_by();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0, done = 0, threads_sum = 0;
  // The first fetch holds up the step either way; later ones only without a lane, whose wait the
  // lane measures on the device instead.
  auto waited_fetch = [&](int slot) {
    const auto asked = clock::now();
    const bool got = feed.fetch(queued.labels(slot));
    st.data_wait_seconds += std::chrono::duration<double>(clock::now() - asked).count();
    return got;
  };
  // Reads the step that used `slot` back and scores it (it was the `number`th of the run).
  auto score = [&](int slot, int64_t number) {
    queued.wait(slot);
    ++done;
    // Over every rank's rows: each rank's loss is its batch's mean, and the batches are equal.
    double step_sums[2] = {queued.loss(slot),
                           static_cast<double>(count_correct(queued.logits(slot), queued.labels(slot), batch_, classes))};
    if (distributed::World* w = config_.backend_options.world.get()) w->sum(step_sums, 2);
    const double l = step_sums[0] / world_size();
    if (!std::isfinite(l))
      throw Error("the loss became " + std::to_string(l) + " at step " + std::to_string(number) +
                  "; lower the learning rate (--lr)");
    loss_sum += l;
    correct += static_cast<int64_t>(step_sums[1]);
    seen += global_batch();
    if (on_batch) {
      const double secs = std::chrono::duration<double>(clock::now() - start).count();
      on_batch(done, per_epoch, loss_sum / done, static_cast<double>(correct) / seen, seen / std::max(secs, 1e-9));
    }
  };
  try {
    int slot = 0;
    int64_t queued_steps = 0;  // of this epoch
    bool have = waited_fetch(slot);
    while (have) {
      st.lr = milestones.empty() ? learning_rate(step_, total, warmup, config_.lr)
                                 : step_learning_rate(step_, warmup, config_.lr, milestones, config_.lr_gamma);
      queued.send(slot, static_cast<float>(st.lr));
      if (lane)
        train_->take_input(*lane, images_id);
      else
        train_->upload(images_id);
      train_->run();
      if (!train_->on_device()) threads_sum += omp_get_max_threads();
      if (lane) lane->mark_step_end();
      queued.read_back(slot);
      ++step_;
      // The step before this one ran while this one was queued: read it back now, and fetch the
      // next batch into its slot while this step runs.
      if (queued_steps++ > 0) score(1 - slot, step_ - 1);
      slot ^= 1;
      have = lane ? feed.fetch(queued.labels(slot)) : waited_fetch(slot);
      // The epoch's first batch was waited for on the host (its wait would otherwise also count
      // the time since the last step of the epoch before: an evaluation, a checkpoint).
      if (lane) {
        const double waited = lane->device_wait_seconds();
        if (queued_steps > 1) st.data_wait_seconds += waited;
      }
    }
    if (queued_steps > 0) score(1 - slot, step_);
  } catch (...) {
    // A batch and a step may be in flight: a later epoch starts with a new lane and new slots.
    lane_.reset();
    queued_.reset();
    throw;
  }
  // The source's memory may be freed once the epoch is over: unlock it while it still exists.
  if (lane) lane->release_host_memory();
  st.seconds = std::chrono::duration<double>(clock::now() - start).count();
  st.loss = done ? loss_sum / done : 0;
  st.accuracy = seen ? static_cast<double>(correct) / seen : 0;
  st.images_per_second = seen / std::max(st.seconds, 1e-9);
  st.mean_threads = done ? static_cast<double>(threads_sum) / done : 0;
  return st;
}

EvalStats Trainer::evaluate(const data::Dataset& ds) {
  auto all = std::make_unique<data::BatchIterator>(ds, global_batch(), false, 0, false);
  if (world_size() == 1) return evaluate(*all);
  data::ShardedBatches mine(std::move(all), config_.backend_options.world->rank(), world_size(),
                            ds.sample_size());
  return evaluate(mine);
}

void Trainer::average_running_statistics() {
  distributed::World* w = config_.backend_options.world.get();
  if (!w || w->size() < 2 || config_.backend_options.sync_batchnorm || statistics_averaged_at_ == step_) return;
  statistics_averaged_at_ = step_;
  const std::vector<int> stats = train_->running_statistics();
  std::vector<double> sums;  // every statistic of the network, in one collective
  for (int v : stats) {
    if (train_->graph().value(v).dtype != DType::f32)
      throw Error("running statistic '" + train_->graph().value(v).name + "' is not f32");
    train_->download(v);
    const TensorView t = train_->host_view(v);
    sums.insert(sums.end(), t.as<float>(), t.as<float>() + t.numel());
  }
  w->sum(sums.data(), sums.size());
  size_t at = 0;
  for (int v : stats) {
    TensorView t = train_->host_view(v);
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = static_cast<float>(sums[at++] / w->size());
    train_->upload(v);
  }
}

EvalStats Trainer::evaluate(data::BatchSource& batches) {
  average_running_statistics();
  eval_->copy_weights_from(*train_);
  if (config_.upload_ahead && eval_->on_device() && !eval_lane_)
    eval_lane_ = eval_->make_input_lane(eval_->value_id("images"));
  try {
    return evaluate_executable(*eval_, batches, config_.backend_options.world.get(), eval_lane_.get(), config_.decode,
                               config_.send_pixels);
  } catch (...) {
    eval_lane_.reset();  // a batch may be in flight: the next evaluation starts with a new lane
    throw;
  }
}

namespace {
// Adds one scored batch's rows to the sums: the real (`filled`) and labelled rows only.
void score_rows(const float* logits, const int32_t* labels, int64_t filled, int64_t classes, int64_t& correct,
                int64_t& top5, double& nll, int64_t& samples) {
  correct += count_correct(logits, labels, filled, classes);
  for (int64_t r = 0; r < filled; ++r) {
    if (labels[r] < 0) continue;  // an image the source could not read: not scored
    const float* z = logits + r * classes;
    int64_t above = 0;  // logits strictly above the label's: the label is in the top five when fewer than 5
    for (int64_t k = 0; k < classes; ++k) above += z[k] > z[labels[r]];
    top5 += above < 5;
    double m = z[0], s = 0;
    for (int64_t k = 1; k < classes; ++k) m = std::max<double>(m, z[k]);
    for (int64_t k = 0; k < classes; ++k) s += std::exp(z[k] - m);
    nll += m + std::log(s) - z[labels[r]];
    ++samples;
  }
}
}  // namespace

EvalStats evaluate_executable(Executable& exe, data::BatchSource& batches, distributed::World* world, InputLane* lane,
                              TrainConfig::Decode decode, bool send_pixels) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const int images_id = exe.value_id("images");
  TensorView logits = exe.host_view(exe.logits());
  const int64_t batch = exe.find("images").shape[0];
  check_batch_fits(batches, batch, "evaluation");
  // With a lane, batch k + 1 is sent while batch k runs (labels and real rows in slot (k + 1) % 2).
  std::vector<int32_t> labels[2] = {std::vector<int32_t>(static_cast<size_t>(batch)),
                                    std::vector<int32_t>(static_cast<size_t>(batch))};
  int64_t filled[2] = {0, 0};
  int slot = 0;
  BatchFeed feed(batches, lane, lane ? TensorView{} : exe.host_view(images_id), decode, send_pixels, "evaluation");
  batches.start_epoch(0);
  const int64_t classes = logits.shape[1];
  EvalStats st;
  int64_t correct = 0, top5 = 0;
  double nll = 0;
  bool have = feed.fetch(labels[slot].data(), &filled[slot]);
  while (have) {
    if (lane)
      exe.take_input(*lane, images_id);
    else
      exe.upload(images_id);
    exe.run();
    const int ran = slot;
    if (lane) slot ^= 1, have = feed.fetch(labels[slot].data(), &filled[slot]);  // beside the running batch
    exe.download(exe.logits());
    score_rows(logits.as<float>(), labels[ran].data(), filled[ran], classes, correct, top5, nll, st.samples);
    if (!lane) have = feed.fetch(labels[slot].data(), &filled[slot]);
  }
  // The source's memory may be freed once the evaluation is over: unlock it while it still exists.
  if (lane) lane->release_host_memory();
  // Each rank evaluated its own shard: the counts and the loss sum over the ranks.
  double sums[4] = {static_cast<double>(correct), static_cast<double>(top5), nll, static_cast<double>(st.samples)};
  if (world) world->sum(sums, 4);
  correct = static_cast<int64_t>(sums[0]);
  top5 = static_cast<int64_t>(sums[1]);
  nll = sums[2];
  st.samples = static_cast<int64_t>(sums[3]);
  st.accuracy = st.samples ? static_cast<double>(correct) / st.samples : 0;
  st.top5_accuracy = st.samples ? static_cast<double>(top5) / st.samples : 0;
  st.loss = st.samples ? nll / st.samples : 0;
  st.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return st;
}

}  // namespace trident::runtime
